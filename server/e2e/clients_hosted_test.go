package e2e_test

import (
	"os"
	"strings"
	"testing"

	"github.com/keelrun/keel"
)

// The clients' types of a hosted tool's use (hosted_tool.activity,
// docs/contract.md §1.3) have exactly the fields keel puts on the wire:
// HostedToolActivity in the TypeScript client's index.d.ts, which its
// event union names as the data of hosted_tool.activity, and in the
// Python client's types.py.
func TestClientsDeclareHostedTools(t *testing.T) {
	fields := jsonFields(keel.HostedToolActivity{})
	dts, err := os.ReadFile(tsClientDir + "/index.d.ts")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range declarationMismatches(string(dts), routeTable{Schemas: map[string][]string{"HostedToolActivity": fields}}) {
		t.Errorf("%s/index.d.ts: %s", tsClientDir, m)
	}
	if !strings.Contains(string(dts), `Durable<"`+keel.TypeHostedToolActivity+`", HostedToolActivity>`) {
		t.Errorf("%s/index.d.ts: the event union does not name HostedToolActivity as %s's data", tsClientDir, keel.TypeHostedToolActivity)
	}
	py, err := os.ReadFile(pyClientDir + "/keel_client/types.py")
	if err != nil {
		t.Fatal(err)
	}
	got, ok := pythonClassFields(string(py), "HostedToolActivity")
	if !ok {
		t.Fatalf("%s/keel_client/types.py: no class HostedToolActivity", pyClientDir)
	}
	if d := setDiff(got, fields); d != "" {
		t.Errorf("%s/keel_client/types.py: HostedToolActivity: fields %s", pyClientDir, d)
	}
}
