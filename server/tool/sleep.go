package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/keelrun/keel"
)

// Bounds of the sleep tool. Hours and days are fine: in a run, sleep is a
// durable Temporal timer that survives worker and server restarts.
const (
	MinSleep = time.Millisecond
	MaxSleep = 7 * 24 * time.Hour
)

var sleepSchema = json.RawMessage(`{"type":"object","properties":{"seconds":{"type":"number","minimum":0.001,"maximum":604800,` +
	`"description":"How long to wait, in seconds (fractions allowed; at most 604800, 7 days)."}},` +
	`"required":["seconds"],"additionalProperties":false}`)

// Sleep returns the sleep tool: it waits {"seconds": number} before
// returning. It is workflow-native (NativeSleep): the run turns it
// into a durable timer, using SleepDuration to read the arguments. Its Call,
// for use outside a workflow, waits on a plain timer.
func Sleep() Tool { return sleepTool{} }

type sleepTool struct{}

var _ Native = sleepTool{}

func (sleepTool) Spec() keel.ToolSpec {
	return keel.ToolSpec{
		Name: NativeSleep,
		Description: "Wait for a while before continuing, for example before checking on something again. " +
			"Waiting hours or days is fine.",
		Parameters: sleepSchema,
	}
}

func (sleepTool) NativeKind() string { return NativeSleep }

func (sleepTool) Call(ctx context.Context, args json.RawMessage) (Result, error) {
	d, err := SleepDuration(args)
	if err != nil {
		return argumentError(NativeSleep, err).Result(), nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return Result{Output: "slept " + d.String()}, nil
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// SleepDuration reads the sleep tool's arguments, {"seconds": number},
// rounded to the millisecond. It returns an *ArgumentError unless the
// duration is within [MinSleep, MaxSleep]. It is deterministic, for use in
// the run's workflow code.
func SleepDuration(args json.RawMessage) (time.Duration, error) {
	bad := func(format string, a ...any) (time.Duration, error) {
		return 0, &ArgumentError{Tool: NativeSleep, Problems: []string{fmt.Sprintf(format, a...)}}
	}
	var in struct {
		Seconds *float64 `json:"seconds"`
	}
	dec := json.NewDecoder(bytes.NewReader(normalizeArgs(args)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return bad(`want {"seconds": number}: %v`, err)
	}
	if in.Seconds == nil {
		return bad(`missing "seconds"`)
	}
	s := *in.Seconds
	if math.IsNaN(s) || s < MinSleep.Seconds() || s > MaxSleep.Seconds() {
		return bad("seconds must be between %g and %g (7 days), got %g", MinSleep.Seconds(), MaxSleep.Seconds(), s)
	}
	return time.Duration(math.Round(s*1000)) * time.Millisecond, nil
}
