package logging_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/keelrun/keel/logging"
)

func TestParseFormat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want logging.Format
		bad  bool
	}{
		{in: "json", want: logging.FormatJSON},
		{in: "console", want: logging.FormatConsole},
		{in: "JSON", bad: true},
		{in: "text", bad: true},
		{in: "", bad: true},
	} {
		got, err := logging.ParseFormat(tc.in)
		if tc.bad {
			var ve *logging.ValueError
			if !errors.As(err, &ve) || ve.Setting != "log format" || ve.Value != tc.in {
				t.Errorf("ParseFormat(%q) error = %v, want a *ValueError for it", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseFormat(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestParseLevel(t *testing.T) {
	for in, want := range map[string]zapcore.Level{
		"debug": zapcore.DebugLevel, "info": zapcore.InfoLevel, "warn": zapcore.WarnLevel, "error": zapcore.ErrorLevel,
	} {
		if got, err := logging.ParseLevel(in); err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"verbose", "WARN", "fatal", "dpanic", ""} {
		_, err := logging.ParseLevel(in)
		var ve *logging.ValueError
		if !errors.As(err, &ve) || ve.Setting != "log level" {
			t.Errorf("ParseLevel(%q) error = %v, want a *ValueError", in, err)
			continue
		}
		if want := `logging: log level "` + in + `": want debug, info, warn or error`; err.Error() != want {
			t.Errorf("error = %q, want %q", err, want)
		}
	}
}

func TestNewJSON(t *testing.T) {
	var buf bytes.Buffer
	l, err := logging.New(logging.Options{Format: logging.FormatJSON, Level: zapcore.WarnLevel, Output: &buf})
	if err != nil {
		t.Fatal(err)
	}
	l.Info("dropped: below the level")
	logging.ForRun(l, "s1", "s1/run-2", 3, 1).Warn("kept", zap.String("tool", "read_file"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one record, got %d:\n%s", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("record is not JSON: %v\n%s", err, lines[0])
	}
	for k, want := range map[string]any{
		"level": "warn", "msg": "kept", "session_id": "s1", "run_id": "s1/run-2", "step": 3.0, "attempt": 1.0, "tool": "read_file",
	} {
		if rec[k] != want {
			t.Errorf("%s = %v, want %v (record %s)", k, rec[k], want, lines[0])
		}
	}
	if _, ok := rec["ts"]; !ok {
		t.Errorf("record has no ts: %s", lines[0])
	}
}

func TestNewConsole(t *testing.T) {
	var buf bytes.Buffer
	l, err := logging.New(logging.Options{Format: logging.FormatConsole, Level: zapcore.DebugLevel, Output: &buf})
	if err != nil {
		t.Fatal(err)
	}
	l.Debug("hello", zap.String("session_id", "s1"))
	out := buf.String()
	if !strings.Contains(out, "DEBUG") || !strings.Contains(out, "hello") || !strings.Contains(out, `{"session_id": "s1"}`) {
		t.Errorf("console record = %q", out)
	}
	if strings.HasPrefix(strings.TrimSpace(out), "{") {
		t.Errorf("console record is JSON: %q", out)
	}
}

func TestNewBadFormat(t *testing.T) {
	_, err := logging.New(logging.Options{Format: "xml"})
	var ve *logging.ValueError
	if !errors.As(err, &ve) || ve.Value != "xml" {
		t.Fatalf("New with format xml: %v, want a *ValueError", err)
	}
}

func TestWorkflowFields(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want map[string]any
	}{
		{id: "s1/run-3", want: map[string]any{"session_id": "s1", "run_id": "s1/run-3"}},
		{id: "s1", want: map[string]any{"session_id": "s1"}},
		{id: "keel-runtime", want: map[string]any{}},
		{id: "other/thing", want: map[string]any{}},
		{id: "", want: map[string]any{}},
	} {
		enc := zapcore.NewMapObjectEncoder()
		for _, f := range logging.WorkflowFields(tc.id) {
			f.AddTo(enc)
		}
		if diff := cmp.Diff(tc.want, enc.Fields); diff != "" {
			t.Errorf("WorkflowFields(%q) (-want +got):\n%s", tc.id, diff)
		}
	}
}

func TestForRunLeavesOutUnknownStep(t *testing.T) {
	enc := zapcore.NewMapObjectEncoder()
	var buf bytes.Buffer
	l, _ := logging.New(logging.Options{Format: logging.FormatJSON, Output: &buf})
	logging.ForRun(l, "s1", "s1/run-1", 0, 2).Info("compaction")
	if err := json.Unmarshal(buf.Bytes(), &enc.Fields); err != nil {
		t.Fatal(err)
	}
	if _, ok := enc.Fields["step"]; ok || enc.Fields["attempt"] != 2.0 {
		t.Errorf("record = %v, want attempt 2 and no step", enc.Fields)
	}
}

func TestAtLeast(t *testing.T) {
	var buf bytes.Buffer
	l, _ := logging.New(logging.Options{Format: logging.FormatJSON, Level: zapcore.DebugLevel, Output: &buf})
	quiet := logging.AtLeast(l, zapcore.WarnLevel).With(zap.String("component", "temporal"))
	quiet.Info("dropped")
	quiet.Warn("kept")
	l.Debug("the rest still at debug")
	out := buf.String()
	if strings.Contains(out, "dropped") || !strings.Contains(out, `"msg":"kept","component":"temporal"`) ||
		!strings.Contains(out, "the rest still at debug") {
		t.Errorf("records:\n%s", out)
	}
	if quiet.Core().Enabled(zapcore.InfoLevel) {
		t.Error("quiet logger enabled at info")
	}
}
