package activities

import (
	"context"
	"fmt"
	"sync"
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

// fixedReader answers every transcript read with n messages.
type fixedReader struct{ n int }

func (r fixedReader) Transcript(_ context.Context, ref TranscriptRef) ([]keel.Message, error) {
	return make([]keel.Message, r.n), nil
}

// The first turns of a worker find its cache made once, whatever their
// number: under -race, a check of the cache outside its lock was a data
// race between two first turns (a clean-clone CI run saw it).
func TestFirstTurnsShareOneCache(t *testing.T) {
	a := &Activities{Runs: fixedReader{n: 2}}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			ref := TranscriptRef{WorkflowID: fmt.Sprint("s", i), RunID: "r", Len: 2}
			if _, err := a.transcript(context.Background(), ref, nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := a.cache.entries.Len(); got != 8 {
		t.Fatalf("the cache holds %d transcripts of 8 sessions: turns made caches of their own", got)
	}
}
