package devserver

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"
	persistencespb "go.temporal.io/server/api/persistence/v1"
	"go.temporal.io/server/common/log/tag"
	"go.uber.org/zap/zapcore"

	"github.com/keelrun/keel/logging"
)

func TestReconcileNamespace(t *testing.T) {
	cfg := Config{Retention: DefaultRetention}
	ns := &persistencespb.NamespaceDetail{}
	changed, err := reconcileNamespace(ns, cfg)
	if err != nil || !changed {
		t.Fatalf("first reconcile = %v, %v; want a change", changed, err)
	}
	want := map[string]string{
		"Keyword01": "KeelSessionID",
		"Keyword02": "KeelState",
		"Int01":     "KeelRunNumber",
		"Keyword03": "KeelModel",
		"Keyword04": "KeelParent",
	}
	if diff := cmp.Diff(want, ns.Config.CustomSearchAttributeAliases); diff != "" {
		t.Errorf("aliases (-want +got):\n%s", diff)
	}
	if got := ns.Config.Retention.AsDuration(); got != DefaultRetention {
		t.Errorf("retention = %v, want %v", got, DefaultRetention)
	}

	changed, err = reconcileNamespace(ns, cfg)
	if err != nil || changed {
		t.Errorf("second reconcile = %v, %v; want no change", changed, err)
	}

	// A namespace from an older keel, with a user's attribute in the first
	// keyword column and one of keel's attributes missing.
	ns.Config.CustomSearchAttributeAliases = map[string]string{
		"Keyword01": "CustomerID",
		"Keyword02": "KeelSessionID",
		"Keyword03": "KeelState",
		"Int01":     "KeelRunNumber",
	}
	changed, err = reconcileNamespace(ns, cfg)
	if err != nil || !changed {
		t.Fatalf("upgrade reconcile = %v, %v; want a change", changed, err)
	}
	if got := ns.Config.CustomSearchAttributeAliases["Keyword04"]; got != "KeelModel" {
		t.Errorf("Keyword04 = %q, want KeelModel", got)
	}
	if got := ns.Config.CustomSearchAttributeAliases["Keyword01"]; got != "CustomerID" {
		t.Errorf("the user's attribute moved: Keyword01 = %q", got)
	}

	// keel's name on a column of the wrong type cannot be fixed in place.
	ns.Config.CustomSearchAttributeAliases = map[string]string{"Int02": "KeelState"}
	if _, err := reconcileNamespace(ns, cfg); err == nil {
		t.Error("a search attribute of the wrong type was accepted")
	}
}

func TestFreeColumnExhausted(t *testing.T) {
	columns := map[string]enumspb.IndexedValueType{"Int01": enumspb.INDEXED_VALUE_TYPE_INT}
	if _, err := freeColumn(columns, map[string]string{"Int01": "X"}, enumspb.INDEXED_VALUE_TYPE_INT); err == nil {
		t.Error("freeColumn found a column where all are used")
	}
}

func TestServerLogger(t *testing.T) {
	var buf bytes.Buffer
	zl, err := logging.New(logging.Options{Format: logging.FormatJSON, Level: zapcore.DebugLevel, Output: &buf})
	if err != nil {
		t.Fatal(err)
	}
	l := newServerLogger(zl, zapcore.WarnLevel)
	l.Info("chatty")
	l.Warn("kept", tag.NewStringTag("shard", "1"))
	for msg := range benignWarnings {
		l.Warn(msg)
	}
	l.With(tag.NewStringTag("service", "history")).Error("failed", tag.WorkflowID("s1/run-2"))
	l.stopping.Store(true)
	l.Error("poll failed during shutdown")

	out := buf.String()
	for _, want := range []string{`"msg":"kept"`, `"shard":"1"`, `"msg":"failed"`, `"service":"history"`, `"component":"temporal"`, `"wf-id":"s1/run-2","session_id":"s1","run_id":"s1/run-2"`, `"caller":"devserver/unit_test.go:`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	for _, unwanted := range []string{"chatty", "Nexus", "shutdown"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("log has %q:\n%s", unwanted, out)
		}
	}

	defer func() {
		if _, ok := recover().(fatalError); !ok {
			t.Error("Fatal did not panic with a fatalError")
		}
	}()
	l.Fatal("cannot listen")
}
