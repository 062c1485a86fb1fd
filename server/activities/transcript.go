package activities

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/internal/lru"
	"github.com/keelrun/keel/server/provider"
)

// transcript rebuilds the conversation a turn refers to: from the worker's
// cache when it holds the prefix, from the session's workflow otherwise.
func (a *Activities) transcript(ctx context.Context, ref TranscriptRef, tail []keel.Message) ([]keel.Message, error) {
	cache := a.transcripts()
	if msgs, ok := cache.get(ref, tail); ok {
		return msgs, nil
	}
	if a.Runs == nil {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("transcript of %s not cached and no run reader configured", ref.WorkflowID),
			string(keel.CodeInternal), nil)
	}
	msgs, err := a.Runs.Transcript(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("fetch transcript of %s: %w", ref.WorkflowID, err)
	}
	if len(msgs) != ref.Len {
		return nil, fmt.Errorf("transcript of %s has %d messages, want %d", ref.WorkflowID, len(msgs), ref.Len)
	}
	cache.put(ref, msgs)
	return msgs, nil
}

var cacheInit sync.Mutex

// transcripts returns the transcript cache, made by the first turn that
// needs it. Every turn takes the lock: a check of a.cache outside it
// would race with the turn that makes it.
func (a *Activities) transcripts() *transcriptCache {
	cacheInit.Lock()
	defer cacheInit.Unlock()
	if a.cache == nil {
		n := a.CacheRuns
		if n <= 0 {
			n = DefaultCacheRuns
		}
		a.cache = &transcriptCache{entries: lru.New[*cacheEntry](n)}
	}
	return a.cache
}

// transcriptCache holds the latest known transcript of recent sessions:
// one entry a session, for its latest run (a session runs one at a time),
// so a session's length does not grow the cache. Within one run (and one
// compaction generation) a transcript only grows, so a cached prefix plus
// the turn's tail is the whole conversation.
type transcriptCache struct {
	mu      sync.Mutex
	entries *lru.Cache[*cacheEntry] // by session
}

type cacheEntry struct {
	// of names the run execution and generation msgs belong to.
	of   string
	msgs []keel.Message
}

// cacheKey returns the session a transcript belongs to (the workflow ID
// is the session ID) and the identity of the transcript itself.
func cacheKey(ref TranscriptRef) (session, of string) {
	return ref.WorkflowID, ref.WorkflowID + "\x00" + ref.RunID + "\x00" + strconv.Itoa(ref.Generation)
}

func (c *transcriptCache) get(ref TranscriptRef, tail []keel.Message) ([]keel.Message, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var have []keel.Message
	session, of := cacheKey(ref)
	if e, ok := c.entries.Get(session); ok && e.of == of {
		have = e.msgs
	}
	var msgs []keel.Message
	switch {
	case len(tail) == ref.Len:
		msgs = tail
	case have != nil && len(have) >= ref.Len:
		msgs = have[:ref.Len:ref.Len]
	case have != nil && len(have)+len(tail) == ref.Len:
		msgs = make([]keel.Message, 0, ref.Len)
		msgs = append(append(msgs, have...), tail...)
	default:
		return nil, false
	}
	c.putLocked(ref, msgs)
	return msgs, true
}

func (c *transcriptCache) put(ref TranscriptRef, msgs []keel.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(ref, msgs)
}

func (c *transcriptCache) putLocked(ref TranscriptRef, msgs []keel.Message) {
	session, of := cacheKey(ref)
	if e, ok := c.entries.Get(session); ok {
		// Another run or generation of the session replaces the entry.
		if e.of != of || len(msgs) > len(e.msgs) {
			e.of, e.msgs = of, msgs
		}
		return
	}
	c.entries.Put(session, &cacheEntry{of: of, msgs: msgs})
}

// prepare resolves a model spec and rebuilds the conversation a model
// request is about. An unusable spec fails as a turn failure the Run
// workflow does not retry.
func (a *Activities) prepare(ctx context.Context, spec string, ref TranscriptRef, tail []keel.Message) (provider.Provider, string, []keel.Message, error) {
	p, model, err := a.Models.Resolve(spec)
	if err != nil {
		return nil, "", nil, turnError(&TurnFailure{Provider: provider.AsProviderError(spec, err)})
	}
	messages, err := a.transcript(ctx, ref, tail)
	if err != nil {
		return nil, "", nil, err
	}
	if messages, err = a.withAttachments(ctx, messages); err != nil {
		return nil, "", nil, err
	}
	return p, model, messages, nil
}
