package tool

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
)

func TestRegistry(t *testing.T) {
	noop := func(context.Context, struct{}) (string, error) { return "", nil }
	reg, err := NewRegistry(New("b", "B.", noop), New("a", "A.", noop))
	must(t, err)
	if diff := cmp.Diff([]string{"a", "b"}, reg.Names()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	specs, err := reg.Specs([]string{"b", "a"})
	must(t, err)
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"b", "a"}, names); diff != "" {
		t.Errorf("spec order (-want +got):\n%s", diff)
	}
	if _, err := reg.Specs([]string{"a", "shell"}); !errors.Is(err, &keel.Error{Code: keel.CodeToolUnavailable}) {
		t.Errorf("unknown tool: error %v, want CodeToolUnavailable", err)
	}
	if _, ok := reg.Lookup("a"); !ok {
		t.Error("Lookup(a) failed")
	}
	if _, err := NewRegistry(New("a", "", noop), New("a", "", noop)); err == nil {
		t.Error("duplicate names accepted")
	}
}

// Tools come and go while calls look them up (an MCP server's list
// changed); run with -race.
func TestRegistryUnregisterConcurrent(t *testing.T) {
	noop := func(context.Context, struct{}) (string, error) { return "", nil }
	reg, err := NewRegistry(New("a", "A.", noop))
	must(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			reg.Lookup("b")
			reg.Names()
		}
	}()
	for range 200 {
		must(t, reg.Register(New("b", "B.", noop)))
		if !reg.Unregister("b") {
			t.Fatal("Unregister(b) = false after Register")
		}
	}
	<-done
	if reg.Unregister("b") {
		t.Error("Unregister of an absent tool = true")
	}
	if diff := cmp.Diff([]string{"a"}, reg.Names()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
}
