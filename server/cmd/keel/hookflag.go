package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/keelrun/keel/api"
)

// hookFlag is --hook NAME, repeatable: hooks the worker offers that the
// run names (api.RunConfig.Hooks, docs/contract.md §23), in order. Each
// name is checked here, as RunConfig.Validate checks it; whether the
// worker offers it is the worker's to say.
type hookFlag struct {
	names []string
	// update says "" is taken: no hooks (schedule update, which replaces
	// the schedule's config).
	update bool
}

func (h *hookFlag) String() string { return strings.Join(h.names, ",") }

func (h *hookFlag) Set(s string) error {
	switch {
	case s == "" && h.update:
		h.names = nil
		return nil
	case !api.ValidAgentName(s):
		return errors.New("a hook name is letters, digits, '-' and '_', starting with a letter")
	case slices.Contains(h.names, s):
		return fmt.Errorf("%s is named twice", s)
	case len(h.names) == api.MaxRunHooks:
		return fmt.Errorf("a run names at most %d hooks", api.MaxRunHooks)
	}
	h.names = append(h.names, s)
	return nil
}

func (h *hookFlag) register(fs *flagSet, whose string) {
	none := ""
	if h.update {
		none = `; "" for none`
	}
	fs.Var(h, "hook", fmt.Sprintf("run the worker's hook `NAME` (keel.yaml hooks) at the execution boundaries of %s; repeat for more, at most %d, in order%s",
		whose, api.MaxRunHooks, none))
}

// hooks is the run config's hooks: nil when none was given, a copy
// otherwise.
func (h *hookFlag) hooks() []string { return slices.Clone(h.names) }
