package gateway_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

var recordStreams = flag.Bool("record-streams", false, "record the event streams of transcript/testdata from real runs")

// recording is a run recorded into transcript/testdata/NAME.jsonl: its
// script and tools, and what the test does when an event arrives.
type recording struct {
	name   string
	script string
	tools  []string
	// on is called with each event; it may steer, answer or cancel.
	on func(t *testing.T, run *client.Run, env keel.Envelope)
}

// TestRecordTranscriptStreams records, from runs of the shared stack
// (scripted model, NATS live channel), the streams transcript's tests and
// the browser test of the page's reducer replay. It runs only with
// -record-streams; after recording, refresh the expected views with
// `go test ./transcript -update` and read the diff.
func TestRecordTranscriptStreams(t *testing.T) {
	if !*recordStreams {
		t.Skip("records testdata only with -record-streams")
	}
	c := newClient(t, 0)
	for _, rec := range []recording{
		{name: "plain", script: `{"turns":[{"text":["Hello, ","world."],"usage":{"input_tokens":12,"output_tokens":3}}]}`},
		{name: "model_retry", script: `{"turns":[{"failures":[{"kind":"stream_cut","after_chunks":1,"usage":{"input_tokens":9,"output_tokens":1}}],
			"text":["Lost ","words."],"usage":{"input_tokens":9,"output_tokens":2}}]}`},
		{name: "malformed_call_retry", tools: []string{"gate"}, script: `{"turns":[
			{"failures":[{"kind":"malformed"}],"tool_calls":[{"id":"g1","name":"gate","arguments":{"key":"rec-malformed"}}]},
			{"text":["Gate done."]}]}`,
			on: openGateOn("rec-malformed", keel.TypeToolProposed)},
		{name: "parallel_tools", tools: []string{"gate"}, script: `{"turns":[
			{"text":["Two at once."],"tool_calls":[{"id":"p1","name":"gate","arguments":{"key":"rec-p1"}},{"id":"p2","name":"gate","arguments":{"key":"rec-p2"}}],
			 "usage":{"input_tokens":20,"output_tokens":8}},
			{"text":["Both done."],"usage":{"input_tokens":40,"output_tokens":3}}]}`,
			on: func(t *testing.T, run *client.Run, env keel.Envelope) {
				if env.Type == keel.TypeToolStarted {
					var e keel.ToolStarted
					_ = json.Unmarshal(env.Data, &e)
					shared.gates.open("rec-" + e.ToolCallID)
				}
			}},
		{name: "host_input", tools: []string{"ask_user"}, script: `{"turns":[
			{"text":["Asking."],"tool_calls":[{"id":"q1","name":"ask_user","arguments":{"question":"Which colour?","schema":{"type":"string"}}}]},
			{"text":["Blue it is."]}]}`,
			on: func(t *testing.T, run *client.Run, env keel.Envelope) {
				if env.Type == keel.TypeHostInputRequested {
					var e keel.HostInputRequested
					_ = json.Unmarshal(env.Data, &e)
					if err := run.Respond(testCtx(t), e.RequestID, "blue"); err != nil {
						t.Fatal(err)
					}
				}
			}},
		{name: "steering", tools: []string{"gate"}, script: `{"turns":[
			{"text":["Working."],"tool_calls":[{"id":"s1","name":"gate","arguments":{"key":"rec-steer"}}]},
			{"text":["Steered."]}]}`,
			on: func(t *testing.T, run *client.Run, env keel.Envelope) {
				if env.Type == keel.TypeToolStarted {
					if err := run.Steer(testCtx(t), "be brief"); err != nil {
						t.Fatal(err)
					}
				}
				if env.Type == keel.TypeSteeringAccepted {
					shared.gates.open("rec-steer")
				}
			}},
		{name: "cancelled", tools: []string{"gate"}, script: `{"turns":[
			{"text":["Waiting ","forever."],"tool_calls":[{"id":"c1","name":"gate","arguments":{"key":"rec-never"}}]}]}`,
			on: func(t *testing.T, run *client.Run, env keel.Envelope) {
				if env.Type == keel.TypeToolStarted {
					if err := run.Cancel(testCtx(t)); err != nil {
						t.Fatal(err)
					}
				}
			}},
		{name: "failed", script: `{"turns":[{"text":["Half an "],"failures":[{"kind":"invalid_request","status":400,"message":"bad request","after_chunks":1}]}]}`},
		{name: "usage_steps", tools: []string{"gate"}, script: `{"turns":[
			{"tool_calls":[{"id":"u1","name":"gate","arguments":{"key":"rec-usage"}}],"usage":{"input_tokens":100,"output_tokens":10,"cache_read_tokens":40}},
			{"failures":[{"kind":"server_error","status":500,"usage":{"input_tokens":150,"output_tokens":0}}],
			 "text":["Counted."],"usage":{"input_tokens":150,"output_tokens":5,"reasoning_tokens":2}}]}`,
			on: openGateOn("rec-usage", keel.TypeToolProposed)},
	} {
		t.Run(rec.name, func(t *testing.T) {
			record(t, c, rec)
		})
	}
}

// openGateOn opens a gate when an event of the type arrives.
func openGateOn(key, typ string) func(*testing.T, *client.Run, keel.Envelope) {
	return func(t *testing.T, run *client.Run, env keel.Envelope) {
		if env.Type == typ {
			shared.gates.open(key)
		}
	}
}

func record(t *testing.T, c *client.Client, rec recording) {
	ctx := testCtx(t)
	cfg := api.RunConfig{Model: model(t, rec.script), Tools: rec.tools}
	run, err := c.Session("transcript-"+rec.name).Send(ctx, "record "+rec.name, client.WithConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for env, err := range run.Events(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		line, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(append(line, '\n'))
		if rec.on != nil {
			rec.on(t, run, env)
		}
	}
	path := filepath.Join("..", "..", "transcript", "testdata", rec.name+".jsonl")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
