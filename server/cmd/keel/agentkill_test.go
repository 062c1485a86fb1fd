package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/store"
)

// TestKillDevWhileChildRuns kills -9 the whole `keel dev` while a child
// session of a delegating run waits in a durable timer, and starts it again
// on the same data directory (docs/contract.md §21.3): the child goes on
// to its end, the parent gets its answer as the call's result and
// completes, each log is dense with exactly one terminal event, and the
// delegation happened once (one agent.started, one child session).
func TestKillDevWhileChildRuns(t *testing.T) {
	rig := newDevKillRig(t, 5*time.Minute)
	ctx := rig.ctx
	planner := writeScript(t, `{"turns":[
	  {"tool_calls":[{"id":"d1","name":"agent__researcher","arguments":{"task":"find it"}}]},
	  {"text":["planned"]}]}`)
	researcher := writeScript(t, `{"turns":[
	  {"tool_calls":[{"id":"z","name":"sleep","arguments":{"seconds":3}}]},
	  {"text":["found"]}]}`)
	conf := filepath.Join(t.TempDir(), "keel.yaml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`agents:
  planner:
    model: %q
    instructions: Delegate.
    agents: [researcher]
  researcher:
    model: %q
    instructions: Find it.
    tools: [sleep]
`, planner, researcher)), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() *devProcess { return startDevProcess(t, rig.data, rig.workspace, 0, nil, "--config", conf) }
	dial := func(p *devProcess) *client.Client {
		c, err := client.Dial(ctx, client.Options{HostPort: p.address, DataConverter: store.NewDataConverter(rig.codec)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	p := start()
	c := dial(p)
	run, err := c.Session("kill-agent").Send(ctx, "plan it", client.WithConfig(api.RunConfig{Agent: "planner"}))
	if err != nil {
		t.Fatal(err)
	}
	// The parent's history records the child's start; then follow it.
	hist := c.Temporal().GetWorkflowHistory(ctx, "kill-agent", "", true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var childID string
	for hist.HasNext() && childID == "" {
		ev, err := hist.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetChildWorkflowExecutionStartedEventAttributes(); a != nil {
			childID = a.GetWorkflowExecution().GetWorkflowId()
		}
	}
	child := c.Session(childID)
	// The child is in its durable timer: kill everything.
	for ev, err := range child.EventsFrom(ctx, 0) {
		if err != nil {
			t.Fatalf("child events: %v", err)
		}
		if ev.Type == keel.TypeToolStarted {
			break
		}
	}
	c.Close()
	p.kill()
	t.Log("killed keel dev while the child slept")

	p = start()
	c = dial(p)
	defer c.Close()
	out, err := c.Session("kill-agent").Run(run.Number).Outcome(ctx)
	if err != nil || out.Text != "planned" {
		t.Fatalf("parent outcome %+v: %v", out, err)
	}
	log, err := c.Session("kill-agent").EventsAfter(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkDenseLog(t, log, []string{"plan it"})
	var started, finished int
	for _, ev := range log {
		switch ev.Type {
		case keel.TypeAgentStarted:
			started++
		case keel.TypeAgentFinished:
			finished++
			if !strings.Contains(string(ev.Data), `"status":"completed"`) {
				t.Errorf("agent.finished %s", ev.Data)
			}
		case keel.TypeToolFinished:
			if !strings.Contains(string(ev.Data), `"output":"found"`) {
				t.Errorf("the call's result %s, want the child's answer", ev.Data)
			}
		}
	}
	if started != 1 || finished != 1 {
		t.Fatalf("%d agent.started, %d agent.finished: want one each", started, finished)
	}
	childLog, err := c.Session(childID).EventsAfter(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkDenseLog(t, childLog, []string{"find it"})
	checkStoreIntact(t, ctx, rig.st, rig.storeDir)
}
