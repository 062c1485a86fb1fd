package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/scripted"
	"github.com/keelrun/keel/server/tool"
)

// stepScript is a run of n steps: each model turn calls toolName, the last
// one answers. A tool the run does not offer is answered "unavailable" by
// the workflow itself, with no activity, so the loop goes straight to the
// next model turn: that isolates the run loop's cost per model step.
func stepScript(n int, toolName string) *scripted.Script {
	s := &scripted.Script{Name: "bench"}
	for i := range n - 1 {
		s.Turns = append(s.Turns, scripted.Turn{
			Text:      []string{"step"},
			ToolCalls: []scripted.ScriptedCall{{ID: fmt.Sprintf("c%d", i), Name: toolName, Arguments: []byte(`{}`)}},
		})
	}
	s.Turns = append(s.Turns, scripted.Turn{Text: []string{"done"}})
	return s
}

// NoopTool does nothing, as fast as a tool can.
func NoopTool() tool.Tool {
	return tool.Func("noop", "Do nothing.", nil, func(context.Context, json.RawMessage) (tool.Result, error) {
		return tool.Result{Output: "ok"}, nil
	})
}

// StampingModels resolves every spec to a provider that plays the step
// script and records the wall time at which each request starts, in the
// worker: the interval between consecutive requests is one model step.
type StampingModels struct {
	mu     sync.Mutex
	starts map[string][]time.Time
	play   *scripted.Provider
}

// NewStampingModels returns models for runs of n steps, each calling
// toolName ("noop" for a tool activity per step, anything else for model
// turns only).
func NewStampingModels(n int, toolName string) *StampingModels {
	return &StampingModels{starts: map[string][]time.Time{}, play: scripted.New(stepScript(n, toolName))}
}

// Resolve implements activities.ModelResolver.
func (m *StampingModels) Resolve(string) (provider.Provider, string, error) {
	return stamping{m}, "bench", nil
}

type stamping struct{ m *StampingModels }

func (s stamping) Name() string { return "bench" }

func (s stamping) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	s.m.mu.Lock()
	key := ""
	if len(req.Messages) > 0 {
		key = req.Messages[0].Content // each run's prompt is unique
	}
	s.m.starts[key] = append(s.m.starts[key], time.Now())
	s.m.mu.Unlock()
	return s.m.play.Stream(ctx, req)
}

// Steps returns the intervals between consecutive model requests of the
// run whose prompt was prompt.
func (m *StampingModels) Steps(prompt string) Latencies {
	m.mu.Lock()
	defer m.mu.Unlock()
	ts := m.starts[prompt]
	var out Latencies
	for i := 1; i < len(ts); i++ {
		out = append(out, ts[i].Sub(ts[i-1]))
	}
	return out
}

// MeasureSteps runs `runs` keel runs of n steps each through c, whose
// worker must resolve models with m and offer NoopTool, and returns every
// step interval.
func MeasureSteps(ctx context.Context, c *client.Client, m *StampingModels, runs, n int) (Latencies, error) {
	return MeasureHookedSteps(ctx, c, m, runs, n, nil)
}

// MeasureHookedSteps is MeasureSteps with runs that name hooks.
func MeasureHookedSteps(ctx context.Context, c *client.Client, m *StampingModels, runs, n int, hooks []string) (Latencies, error) {
	var all Latencies
	for i := range runs {
		prompt := fmt.Sprintf("bench %d %d", time.Now().UnixNano(), i)
		if _, err := runSteps(ctx, c, prompt, n, hooks); err != nil {
			return nil, err
		}
		all = append(all, m.Steps(prompt)...)
	}
	return all, nil
}

// runSteps runs one keel run of n steps in a new session and checks that
// it completed them.
func runSteps(ctx context.Context, c *client.Client, prompt string, n int, hooks []string) (*client.Run, error) {
	run, err := c.NewSession().Send(ctx, prompt, client.WithConfig(api.RunConfig{
		Model: "scripted:bench", Tools: []string{"noop"}, MaxSteps: n + 1, Hooks: hooks}))
	if err != nil {
		return nil, err
	}
	out, err := run.Outcome(ctx)
	if err != nil {
		return nil, err
	}
	if out.Steps != n || out.Status != keel.StatusCompleted {
		return nil, fmt.Errorf("bench: run took %d steps (%s), want %d", out.Steps, out.Status, n)
	}
	return run, nil
}
