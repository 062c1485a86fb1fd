package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	sdkclient "go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider/scripted"
)

// The streaming run the concurrency benchmark plays on keel: a model turn
// that streams StreamFirstChunks text chunks and calls list_files, then one
// that streams StreamSecondChunks more, StreamChunkDelay apart.
const (
	StreamFirstChunks  = 50
	StreamSecondChunks = 20
	StreamChunkDelay   = 100 * time.Millisecond
)

// scriptedExtraChunks is what the scripted provider streams in a turn
// besides its text, each after the chunk delay too: the usage and finish
// chunks, and two argument fragments per tool call.
const scriptedExtraChunks = 2

// StreamScript returns the scripted model of a streaming run.
func StreamScript() *scripted.Script {
	delay := keel.Duration(StreamChunkDelay)
	return &scripted.Script{
		Name:       "bench-stream",
		ChunkDelay: delay,
		Turns: []scripted.Turn{
			{
				Text:      words(StreamFirstChunks),
				ToolCalls: []scripted.ScriptedCall{{ID: "call_1", Name: "list_files", Arguments: []byte(`{"path":"."}`)}},
			},
			{Text: words(StreamSecondChunks)},
		},
	}
}

// StreamTurns returns how long each model turn of StreamScript streams:
// its chunks (text, tool-call fragments, usage, finish) times the delay
// before each. The bare baseline's activities stream for the same times.
func StreamTurns() []time.Duration {
	var out []time.Duration
	for _, t := range StreamScript().Turns {
		chunks := len(t.Text) + scriptedExtraChunks + 2*len(t.ToolCalls)
		out = append(out, time.Duration(chunks)*StreamChunkDelay)
	}
	return out
}

// ModelTime is the whole time a streaming run's model streams.
func ModelTime() time.Duration {
	var sum time.Duration
	for _, d := range StreamTurns() {
		sum += d
	}
	return sum
}

func words(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("word%d ", i)
	}
	return out
}

// scriptJSON encodes a script for a worker that offers it as scripted:NAME
// from its scripts directory.
func scriptJSON(s *scripted.Script) ([]byte, error) {
	return json.MarshalIndent(s, "", " ")
}

// warmScript is one short turn: a run that readies the worker and the
// server's caches before a measurement.
var warmScript = &scripted.Script{Name: "bench-warm", Turns: []scripted.Turn{{Text: []string{"ready"}}}}

// Names of the bare baseline's workflow and activity.
const (
	baselineWorkflowName = "keel.bench.StreamingBaseline"
	baselineActivityName = "keel.bench.Stream"
)

// BaselineTaskQueue is the task queue of the bare baseline's worker.
const BaselineTaskQueue = "keel-bench-baseline"

// BaselineInput says what one bare baseline workflow runs: one activity per
// turn, each streaming Chunks[i] chunks Delay apart, and the tool activity
// between turns.
type BaselineInput struct {
	Chunks []int         `json:"chunks"`
	Delay  time.Duration `json:"delay"`
}

// streamingBaselineInput mirrors StreamScript: the same turns, chunk for
// chunk.
func streamingBaselineInput() BaselineInput {
	in := BaselineInput{Delay: StreamChunkDelay}
	for _, d := range StreamTurns() {
		in.Chunks = append(in.Chunks, int(d/StreamChunkDelay))
	}
	return in
}

// baselineWorkflow runs what a keel run of StreamScript runs, as a bare
// Temporal program would: a streaming activity per model turn with the
// tool call between turns as an activity of its own (stream, tool,
// stream), so keel, the shaped baseline and this one run the same
// activities and differ only in what they add around them. No
// heartbeats, default activity options beyond a start-to-close timeout.
// Its "send" update, which the update-with-start baseline starts it with,
// answers at once: the update is accepted and completed in the workflow
// task that takes it.
func baselineWorkflow(ctx workflow.Context, in BaselineInput) error {
	if err := workflow.SetUpdateHandler(ctx, shapeUpdate, func(workflow.Context) error { return nil }); err != nil {
		return err
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Minute})
	for i, n := range in.Chunks {
		if i > 0 {
			if err := workflow.ExecuteActivity(ctx, shapeToolName).Get(ctx, nil); err != nil {
				return err
			}
		}
		if err := workflow.ExecuteActivity(ctx, baselineActivityName, n, in.Delay).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// streamActivity sleeps chunks times delay, as a model stream would wait
// for its chunks, and never heartbeats.
func streamActivity(ctx context.Context, chunks int, delay time.Duration) (string, error) {
	var b strings.Builder
	t := time.NewTimer(delay)
	defer t.Stop()
	for i := range chunks {
		select {
		case <-ctx.Done():
			return b.String(), ctx.Err()
		case <-t.C:
		}
		t.Reset(delay)
		fmt.Fprintf(&b, "word%d ", i)
	}
	return b.String(), nil
}

// NewBaselineWorker returns a worker of the bare baseline and the shaped
// one on BaselineTaskQueue, with Temporal's default worker options.
func NewBaselineWorker(c sdkclient.Client) sdkworker.Worker {
	w := sdkworker.New(c, BaselineTaskQueue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(baselineWorkflow, workflow.RegisterOptions{Name: baselineWorkflowName})
	w.RegisterWorkflowWithOptions(shapeSessionWorkflow, workflow.RegisterOptions{Name: shapeSessionName})
	// The shaped baseline's run is the bare workflow, started as a child.
	w.RegisterWorkflowWithOptions(baselineWorkflow, workflow.RegisterOptions{Name: shapeRunName})
	w.RegisterActivityWithOptions(streamActivity, activity.RegisterOptions{Name: baselineActivityName})
	w.RegisterActivityWithOptions(toolActivity, activity.RegisterOptions{Name: shapeToolName})
	return w
}
