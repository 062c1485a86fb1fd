package activities

import (
	"fmt"
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
	// A run is one execution of its session's workflow: the run ID of
	// the execution names it.
	exec := func(n int) string { return fmt.Sprint("exec-", n) }
	for n := 1; n <= 20; n++ {
		ref := TranscriptRef{WorkflowID: "s1", RunID: exec(n), Len: n}
		c.put(ref, msgs(n))
	}
	c.put(TranscriptRef{WorkflowID: "s2", RunID: exec(1), Len: 1}, msgs(1))
	if got := c.entries.Len(); got != 2 {
		t.Fatalf("cache holds %d entries for 2 sessions", got)
	}
	if _, ok := c.get(TranscriptRef{WorkflowID: "s1", RunID: exec(20), Len: 21}, msgs(21)[20:]); !ok {
		t.Error("the latest run's transcript plus its tail missed")
	}
	if _, ok := c.get(TranscriptRef{WorkflowID: "s1", RunID: exec(19), Len: 19}, nil); ok {
		t.Error("an earlier run of the session was served from the latest run's entry")
	}
	if _, ok := c.get(TranscriptRef{WorkflowID: "s1", RunID: exec(20), Len: 5, Generation: 1}, nil); ok {
		t.Error("a later compaction generation was served from the older one")
	}
}
