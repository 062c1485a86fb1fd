package e2e_test

import (
	"os"
	"strings"
	"testing"

	"github.com/keelrun/keel"
)

// The clients' types of a run's hook events (docs/contract.md §23) have
// exactly the fields keel puts on the wire: BoundaryInputApplied,
// HookDecided and HookFailed in the TypeScript client's index.d.ts, whose
// event union names each as its event's data, and in the Python client's
// types.py.
func TestClientsDeclareHooks(t *testing.T) {
	types := map[string]struct {
		event  string
		fields []string
	}{
		"BoundaryInputApplied": {keel.TypeBoundaryInputApplied, jsonFields(keel.BoundaryInputApplied{})},
		"HookDecided":          {keel.TypeHookDecided, jsonFields(keel.HookDecided{})},
		"HookFailed":           {keel.TypeHookFailed, jsonFields(keel.HookFailed{})},
	}
	dts, err := os.ReadFile(tsClientDir + "/index.d.ts")
	if err != nil {
		t.Fatal(err)
	}
	py, err := os.ReadFile(pyClientDir + "/keel_client/types.py")
	if err != nil {
		t.Fatal(err)
	}
	for name, ty := range types {
		for _, m := range declarationMismatches(string(dts), routeTable{Schemas: map[string][]string{name: ty.fields}}) {
			t.Errorf("%s/index.d.ts: %s", tsClientDir, m)
		}
		if !strings.Contains(string(dts), `Durable<"`+ty.event+`", `+name+`>`) {
			t.Errorf("%s/index.d.ts: the event union does not name %s as %s's data", tsClientDir, name, ty.event)
		}
		got, ok := pythonClassFields(string(py), name)
		if !ok {
			t.Errorf("%s/keel_client/types.py: no class %s", pyClientDir, name)
			continue
		}
		if d := setDiff(got, ty.fields); d != "" {
			t.Errorf("%s/keel_client/types.py: %s: fields %s", pyClientDir, name, d)
		}
	}
}
