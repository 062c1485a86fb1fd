package activities

import (
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/internal/lru"
)

// The cache holds one transcript a session, its latest run's: a session's
// length does not grow it, and a turn of an earlier run (or an earlier
// compaction generation) misses rather than reading the wrong messages.
func TestTranscriptCacheKeepsOneEntryASession(t *testing.T) {
	c := &transcriptCache{entries: lru.New[*cacheEntry](8)}
	msgs := func(n int) []keel.Message {
		out := make([]keel.Message, n)
		for i := range out {
			out[i] = keel.UserMessage(string(rune('a' + i)))
		}
		return out
	}
	for n := 1; n <= 20; n++ {
		ref := TranscriptRef{WorkflowID: keel.RunID("s1", n), RunID: "r", Len: n}
		c.put(ref, msgs(n))
	}
	c.put(TranscriptRef{WorkflowID: keel.RunID("s2", 1), RunID: "r", Len: 1}, msgs(1))
	if got := c.entries.Len(); got != 2 {
		t.Fatalf("cache holds %d entries for 2 sessions", got)
	}
	if _, ok := c.get(TranscriptRef{WorkflowID: keel.RunID("s1", 20), RunID: "r", Len: 21}, msgs(21)[20:]); !ok {
		t.Error("the latest run's transcript plus its tail missed")
	}
	if _, ok := c.get(TranscriptRef{WorkflowID: keel.RunID("s1", 19), RunID: "r", Len: 19}, nil); ok {
		t.Error("an earlier run of the session was served from the latest run's entry")
	}
	if _, ok := c.get(TranscriptRef{WorkflowID: keel.RunID("s1", 20), RunID: "r", Len: 5, Generation: 1}, nil); ok {
		t.Error("a later compaction generation was served from the older one")
	}
}
