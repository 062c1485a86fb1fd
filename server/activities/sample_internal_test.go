package activities

import (
	"context"
	"errors"
	"iter"
	"sync"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/tool"
)

// recordingProvider answers "ok" and records the requests it got.
type recordingProvider struct {
	mu   sync.Mutex
	reqs []provider.Request
}

func (p *recordingProvider) Name() string { return "openai" }

func (p *recordingProvider) Stream(_ context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	p.mu.Lock()
	p.reqs = append(p.reqs, req)
	p.mu.Unlock()
	return func(yield func(provider.Chunk, error) bool) {
		for _, c := range []provider.Chunk{{Text: "ok"}, {Usage: &keel.Usage{OutputTokens: 1, Requests: 1}}, {Finish: provider.FinishStop}} {
			if !yield(c, nil) {
				return
			}
		}
	}
}

func (p *recordingProvider) requests() []provider.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]provider.Request(nil), p.reqs...)
}

type oneModel struct{ p provider.Provider }

func (m oneModel) Resolve(string) (provider.Provider, string, error) { return m.p, "m", nil }

// The attack: an MCP server allowed to sample asks for more tokens than
// the worker lets any response have, or asks while the provider's slots
// are all taken. A sampling request is a model request like a turn: its
// cap is cut to the worker's (Policy.MaxTokens), and it waits for a slot
// (Policy.Concurrency), giving up when its call ends, without reaching the
// provider. (Before, it went to the provider at once with the server's
// 100,000 tokens.)
func TestSamplingTakesCapsAndSlots(t *testing.T) {
	p := &recordingProvider{}
	a := &Activities{Models: oneModel{p}, Policy: Policy{MaxTokens: 100, Concurrency: map[string]int{"openai": 1}}}
	req := tool.SampleRequest{Messages: []keel.Message{keel.UserMessage("hi")}, MaxTokens: 100_000}
	if _, _, err := a.sample(context.Background(), "openai:m", req); err != nil {
		t.Fatal(err)
	}
	if got := p.requests()[0].MaxTokens; got != 100 {
		t.Errorf("the sampling request asked for %d tokens, want the worker's cap 100", got)
	}

	// The provider's one slot is held (by a model turn): sampling waits.
	release, err := a.slots.acquire(context.Background(), &a.Policy, "openai")
	if err != nil {
		t.Fatal(err)
	}
	ended, end := context.WithCancel(context.Background())
	end()
	if _, _, err := a.sample(ended, "openai:m", req); !errors.Is(err, context.Canceled) {
		t.Fatalf("sampling under a full slot: %v, want to wait until the call ended", err)
	}
	if n := len(p.requests()); n != 1 {
		t.Fatalf("the provider got %d requests, want 1: the waiting one must not reach it", n)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := a.sample(context.Background(), "openai:m", req)
		done <- err
	}()
	release() // the slot frees: the waiting request goes
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(p.requests()); n != 2 {
		t.Fatalf("the provider got %d requests, want 2", n)
	}
}
