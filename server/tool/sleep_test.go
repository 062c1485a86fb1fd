package tool

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSleepDuration(t *testing.T) {
	tests := []struct {
		args    string
		want    time.Duration
		wantErr string
	}{
		{`{"seconds":1}`, time.Second, ""},
		{`{"seconds":0.25}`, 250 * time.Millisecond, ""},
		{`{"seconds":0.001}`, time.Millisecond, ""},
		{`{"seconds":0.0016}`, 2 * time.Millisecond, ""},
		{`{"seconds":7200}`, 2 * time.Hour, ""},
		{`{"seconds":604800}`, 7 * 24 * time.Hour, ""},
		{`{"seconds":0}`, 0, `invalid arguments for tool "sleep": seconds must be between 0.001 and 604800 (7 days), got 0`},
		{`{"seconds":-5}`, 0, `invalid arguments for tool "sleep": seconds must be between 0.001 and 604800 (7 days), got -5`},
		{`{"seconds":0.0004}`, 0, `invalid arguments for tool "sleep": seconds must be between 0.001 and 604800 (7 days), got 0.0004`},
		{`{"seconds":604801}`, 0, `invalid arguments for tool "sleep": seconds must be between 0.001 and 604800 (7 days), got 604801`},
		{`{"seconds":1e300}`, 0, `invalid arguments for tool "sleep": seconds must be between 0.001 and 604800 (7 days), got 1e+300`},
		{`{}`, 0, `invalid arguments for tool "sleep": missing "seconds"`},
		{``, 0, `invalid arguments for tool "sleep": missing "seconds"`},
		{`{"seconds":"5m"}`, 0, `invalid arguments for tool "sleep": want {"seconds": number}: json: cannot unmarshal string into Go struct field .seconds of type float64`},
		{`{"seconds":5,"reason":"x"}`, 0, `invalid arguments for tool "sleep": want {"seconds": number}: json: unknown field "reason"`},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			got, err := SleepDuration(json.RawMessage(tt.args))
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
				var aerr *ArgumentError
				if !errors.As(err, &aerr) {
					t.Errorf("error type %T, want *ArgumentError", err)
				}
			}
			if diff := cmp.Diff(tt.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if got != tt.want {
				t.Errorf("duration = %v, want %v", got, tt.want)
			}
		})
	}
}

// The schema the model sees and SleepDuration agree on the bounds.
func TestSleepSchemaMatchesBounds(t *testing.T) {
	for _, args := range []string{`{"seconds":0.001}`, `{"seconds":604800}`, `{"seconds":0}`, `{"seconds":604800.5}`} {
		_, parseErr := SleepDuration(json.RawMessage(args))
		schemaErr := ValidateJSON(Sleep().Spec().Parameters, json.RawMessage(args))
		if (parseErr == nil) != (schemaErr == nil) {
			t.Errorf("%s: SleepDuration error %v, schema error %v", args, parseErr, schemaErr)
		}
	}
}

func TestSleepCall(t *testing.T) {
	got, err := Sleep().Call(context.Background(), json.RawMessage(`{"seconds":0.001}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Result{Output: "slept 1ms"}, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}

	got, err = Sleep().Call(context.Background(), json.RawMessage(`{"seconds":0}`))
	if err != nil {
		t.Fatal(err)
	}
	want := fail(`invalid arguments for tool "sleep": seconds must be between 0.001 and 604800 (7 days), got 0`)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Call with 0 seconds (-want +got):\n%s", diff)
	}
}

func TestSleepCallStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Sleep().Call(ctx, json.RawMessage(`{"seconds":3600}`))
		done <- err
	}()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}
