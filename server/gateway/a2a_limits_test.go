package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/keelrun/keel/server/gateway"
)

// a2aStreamsAtDefaults, set, makes TestA2AStreamsWithinLimits open
// streams up to the gateway's default limits (500 followed sessions)
// instead of a limit of 20: the measurement docs/interop.md reports.
const a2aStreamsAtDefaults = "KEEL_A2A_STREAMS_AT_DEFAULTS"

// Each A2A stream follows its task with a history long poll of its own
// (MaxFollowedSessions counts it), unlike /events streams, which share
// one per session: a gateway holds as many A2A streams as its followed
// sessions allow, here all resubscribed to one running task, and
// refuses the next one typed (overloaded, retryable) without touching
// the task.
func TestA2AStreamsWithinLimits(t *testing.T) {
	// A gate of this run's own: a gate stays open once opened, and
	// -count reruns the test.
	gate := fmt.Sprintf("a2a-limits-%d", time.Now().UnixNano())
	shared.book.Add(t, "researcher", `{"turns":[
	  {"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"`+gate+`"}}]},
	  {"text":["done"]}]}`)
	opts := gateway.Options{Agents: interopAgents(), MaxFollowedSessions: 20, MaxStreamsPerAddr: -1, MaxStreamsPerKey: -1}
	if os.Getenv(a2aStreamsAtDefaults) != "" {
		opts.MaxFollowedSessions = 0
	}
	s := startGateway(t, opts)
	ctx := testCtx(t)
	c, _ := a2aClient(t, ctx, s, "/v1/a2a/researcher", "")
	no := false
	p := userText("wait")
	p.Config = &a2a.MessageSendConfig{Blocking: &no}
	res, err := c.SendMessage(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	body := `{"jsonrpc":"2.0","id":1,"method":"tasks/resubscribe","params":{"id":"` + string(task.ID) + `"}}`
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000, MaxConnsPerHost: 0}}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	open := func() (*http.Response, error) {
		req, _ := http.NewRequestWithContext(sctx, http.MethodPost, s.srv.URL+"/v1/a2a/researcher", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		return hc.Do(req)
	}
	start := time.Now()
	held := 0
	for {
		resp, err := open()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			rd := bufio.NewReader(resp.Body)
			line, _ := rd.ReadString('\n')
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(line, `"code":-32011`) || !strings.Contains(line, `"retryable":true`) {
				t.Fatalf("stream %d: %d %s", held+1, resp.StatusCode, line)
			}
			break
		}
		// The stream's first event (the task) proves it is held.
		rd := bufio.NewReader(resp.Body)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("stream %d: %v", held+1, err)
			}
			if strings.HasPrefix(line, "data: ") {
				break
			}
		}
		defer resp.Body.Close()
		held++
	}
	want := opts.MaxFollowedSessions
	if want == 0 {
		want = gateway.DefaultMaxFollowedSessions
	}
	// The task's own follower is not held; every stream is.
	if held != want {
		t.Errorf("held %d A2A streams, want %d (MaxFollowedSessions)", held, want)
	}
	t.Logf("one gateway held %d concurrent A2A streams (MaxFollowedSessions %d) in %v; the next was refused 503, JSON-RPC -32011", held, want, time.Since(start))
	// The task is untouched: still working.
	got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateWorking {
		t.Errorf("task after the refusals: %+v %v", got, err)
	}
	stop()
	shared.gates.open(gate)
}
