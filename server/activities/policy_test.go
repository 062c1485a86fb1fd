package activities

import (
	"context"
	"errors"
	"testing"

	"github.com/keelrun/keel/api"
)

func TestPolicyApprovalFor(t *testing.T) {
	p := &Policy{Approvals: map[string]api.Approval{
		"*":                 api.ApprovalAllow,
		"mcp__*":            api.ApprovalAsk,
		"mcp__fs__*":        api.ApprovalDeny,
		"mcp__fs__read_*":   api.ApprovalAllow,
		"write_file":        api.ApprovalAsk,
		"mcp__fs__read_log": api.ApprovalAsk,
	}}
	for name, want := range map[string]api.Approval{
		"write_file":            api.ApprovalAsk,   // exact name
		"read_file":             api.ApprovalAllow, // only "*"
		"mcp__everything__echo": api.ApprovalAsk,   // mcp__*
		"mcp__fs__write_file":   api.ApprovalDeny,  // the longer mcp__fs__*
		"mcp__fs__read_file":    api.ApprovalAllow, // longer still
		"mcp__fs__read_log":     api.ApprovalAsk,   // exact beats every pattern
	} {
		if got := p.ApprovalFor(name); got != want {
			t.Errorf("ApprovalFor(%q) = %q, want %q", name, got, want)
		}
	}
	if got := (&Policy{}).ApprovalFor("sleep"); got != "" {
		t.Errorf("no policy: %q, want none", got)
	}
}

func TestPolicyCapTokens(t *testing.T) {
	p := &Policy{MaxTokens: 100}
	for asked, want := range map[int]int{0: 100, 50: 50, 100: 100, 500: 100} {
		if got := p.capTokens(asked); got != want {
			t.Errorf("capTokens(%d) = %d, want %d", asked, got, want)
		}
	}
	if got := (&Policy{}).capTokens(42); got != 42 {
		t.Errorf("no cap: %d, want 42", got)
	}
}

func TestPolicyConcurrency(t *testing.T) {
	p := &Policy{Concurrency: map[string]int{"openai": 1}}
	var s slots
	release, err := s.acquire(context.Background(), p, "openai")
	if err != nil {
		t.Fatal(err)
	}
	// The one slot is taken: a turn waits, and leaves when its context ends.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.acquire(done, p, "openai"); !errors.Is(err, context.Canceled) {
		t.Fatalf("second openai request: %v, want to wait until cancelled", err)
	}
	// Other providers are not limited.
	if _, err := s.acquire(done, p, "anthropic"); err != nil {
		t.Fatalf("anthropic: %v", err)
	}
	release()
	release2, err := s.acquire(context.Background(), p, "openai")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	release2()
}
