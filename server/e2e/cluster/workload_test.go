package cluster_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/devserver"
)

// The workload: batchSessions sessions at once, one run each. A run
// streams a turn (turnChunks chunks chunkDelay apart), calls an effect
// tool, a slow effect tool (slowToolMS) and sleep (a durable timer of
// napSeconds), then streams a second turn. One session in gatewayEvery
// sends through a gateway's HTTP API and one in cliEvery runs `keel run`;
// the others send through the Go SDK.
const (
	batchSessions = 100
	turnChunks    = 10
	chunkDelay    = "100ms"
	slowToolMS    = 3000
	napSeconds    = 2
	gatewayEvery  = 5
	cliEvery      = 10
)

// runHeartbeat is the sessions' heartbeat timeout: how soon a model turn
// or a tool of a dead worker is retried elsewhere. It must stay above the
// cluster's slowest heartbeat round trip under this load: at 2 s, live
// workers on this machine (2 cores, load 10) missed heartbeats, their
// slow tool calls were retried beside themselves, and the baseline
// applied a slow tool's effect up to four times.
const runHeartbeat = 5 * time.Second

// progress is one run's view from its client: when each event (durable or
// delta) arrived, what the follower received, and what sending cost.
type progress struct {
	session string
	runID   string
	base    int64

	sent       time.Time
	viaGateway bool
	viaCLI     bool
	arrivals   []time.Time
	types      []string // of each arrival, for the slowest run's timeline
	durable    map[int64]keel.Envelope
	deltas     int
	textDeltas int
	lagged     int // *live.LaggedError elements
	resumes    int // follows broken by another error, and resumed
	sendErrors []string
	terminal   *keel.Envelope
	done       time.Time
	seen       map[string]bool // event types seen, for the fault's trigger
}

// phase says when a batch's fault is injected.
type phase struct {
	// name of the event type that, once half the runs have seen it,
	// triggers the fault.
	eventType string
}

var (
	// duringTurns: the first turns stream.
	duringTurns = phase{eventType: keel.TypeTextDelta}
	// duringTools: the slow tool runs.
	duringTools = phase{eventType: keel.TypeToolStarted}
)

// batch is one workload run against the cluster.
type batch struct {
	name    string
	started time.Time
	faultAt time.Time // zero: the trigger never fired
	healed  time.Time
	runs    []*progress
}

// writeScripts writes one script a session: each names its own tool keys,
// so the effects server counts each call apart.
func writeScripts(t *testing.T, dir string, sessions []string) {
	t.Helper()
	chunks := make([]string, turnChunks)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("chunk %02d. ", i)
	}
	usage := map[string]int{"input_tokens": 10, "output_tokens": 20}
	for _, id := range sessions {
		script := map[string]any{
			"name": id, "chunk_delay": chunkDelay,
			"turns": []any{
				map[string]any{"text": chunks, "usage": usage, "tool_calls": []any{
					map[string]any{"id": "fast", "name": effectTool, "arguments": map[string]any{"key": id + "/fast"}},
					map[string]any{"id": "slow", "name": slowEffectTool, "arguments": map[string]any{"key": id + "/slow", "ms": slowToolMS}},
					map[string]any{"id": "nap", "name": "sleep", "arguments": map[string]any{"seconds": napSeconds}},
				}},
				map[string]any{"text": chunks, "usage": usage},
			},
		}
		b, err := json.Marshal(script)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, id+".json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func runConfig(session string) api.RunConfig {
	return api.RunConfig{Model: "scripted:" + session, Tools: []string{effectTool, slowEffectTool, "sleep"},
		HeartbeatAfter: keel.Duration(runHeartbeat)}
}

// runBatch starts batchSessions runs at once and follows each to its end.
// When half the runs have seen at's event type, fault runs (it holds the
// fault and heals it before returning). fault may be nil: the baseline.
func runBatch(t *testing.T, ctx context.Context, top *topology, c *client.Client, name string, at phase, fault func()) *batch {
	t.Helper()
	b := &batch{name: name}
	var ids []string
	n := batchNumber.Add(1)
	for i := range batchSessions {
		ids = append(ids, fmt.Sprintf("b%d-%03d", n, i))
	}
	writeScripts(t, top.scripts, ids)

	var mu sync.Mutex // guards every progress and triggered
	seen := 0
	trigger := make(chan struct{})
	triggered := false
	record := func(p *progress, ev keel.Envelope, err error) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		var lag *live.LaggedError
		if errors.As(err, &lag) {
			p.lagged++ // news of a loss, not progress of the run
			return
		}
		p.arrivals = append(p.arrivals, now)
		p.types = append(p.types, ev.Type)
		switch {
		case ev.Seq == 0:
			p.deltas++
			if ev.Type == keel.TypeTextDelta {
				p.textDeltas++
			}
		default:
			p.durable[ev.Seq] = ev
		}
		if ev.Type == at.eventType && !p.seen[at.eventType] {
			p.seen[at.eventType] = true
			if seen++; seen == batchSessions/2 && !triggered {
				triggered = true
				close(trigger)
			}
		}
	}

	faultDone := make(chan struct{})
	go func() {
		defer close(faultDone)
		select {
		case <-trigger:
		case <-ctx.Done():
			return
		}
		mu.Lock()
		b.faultAt = time.Now()
		mu.Unlock()
		if fault != nil {
			fault()
		}
		mu.Lock()
		b.healed = time.Now()
		mu.Unlock()
	}()

	b.started = time.Now()
	var wg sync.WaitGroup
	for i, id := range ids {
		p := &progress{session: id, durable: map[int64]keel.Envelope{}, seen: map[string]bool{}}
		b.runs = append(b.runs, p)
		wg.Go(func() {
			switch {
			case i%gatewayEvery == 0:
				followGatewayRun(ctx, top.apiURLs[(i/gatewayEvery)%len(top.apiURLs)], c, p, record)
			case i%cliEvery == 1:
				followCLIRun(ctx, top, p, record)
			default:
				followSDKRun(ctx, c, p, record)
			}
		})
	}
	wg.Wait()
	<-faultDone
	return b
}

// batchNumber numbers the batches, whose sessions (and scripts) are
// named after it: a batch's name is for people.
var batchNumber atomic.Int64

// retryPause is a client's pause between retries of a send that failed
// with an error it may retry: the time a real client would back off.
const retryPause = 250 * time.Millisecond

// followSDKRun sends through the Go SDK under a once key, retrying what
// failed with the same key, and follows the run to its terminal event.
func followSDKRun(ctx context.Context, c *client.Client, p *progress, record func(*progress, keel.Envelope, error)) {
	s := c.Session(p.session)
	var run *client.Run
	p.sent = time.Now()
	for {
		var err error
		run, err = s.SendOnce(ctx, p.session+"/send", "go", client.WithConfig(runConfig(p.session)))
		if err == nil {
			break
		}
		p.sendErrors = append(p.sendErrors, err.Error())
		// keel's typed errors say whether to retry; anything else (the
		// frontend unreachable, a deadline) is a transport's, retried.
		var kerr *keel.Error
		if ctx.Err() != nil || errors.As(err, &kerr) && !kerr.Retryable {
			return
		}
		time.Sleep(retryPause)
	}
	p.runID = run.ID
	follow(ctx, s, p, run.Events(ctx), record)
}

// follow reads a run's events until its terminal one; a follow broken by
// anything but lag is resumed from the last durable event received.
func follow(ctx context.Context, s *client.Session, p *progress, events func(func(keel.Envelope, error) bool), record func(*progress, keel.Envelope, error)) {
	last := p.base
	for ctx.Err() == nil {
		broken := false
		for ev, err := range events {
			var lag *live.LaggedError
			if err != nil && !errors.As(err, &lag) {
				broken = true
				break
			}
			if ev.RunID != "" && ev.RunID != p.runID {
				continue
			}
			record(p, ev, err)
			if ev.Seq > last {
				last = ev.Seq
			}
			if ev.Terminal() {
				p.terminal, p.done = &ev, time.Now()
				return
			}
		}
		if !broken && p.terminal != nil {
			return
		}
		p.resumes++
		if ctx.Err() != nil {
			return
		}
		time.Sleep(retryPause)
		events = s.EventsFrom(ctx, last)
	}
}

// followGatewayRun sends through a gateway (POST /runs with a once key,
// retried with it while the gateway answers 5xx or cannot be reached) and
// follows the run through the SDK from the base sequence it answered.
func followGatewayRun(ctx context.Context, apiURL string, c *client.Client, p *progress, record func(*progress, keel.Envelope, error)) {
	p.viaGateway = true
	cfg := runConfig(p.session)
	body, _ := json.Marshal(map[string]any{"prompt": "go", "model": cfg.Model, "tools": cfg.Tools, "once": p.session + "/send"})
	p.sent = time.Now()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, apiURL+"/sessions/"+p.session+"/runs", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			raw, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusAccepted {
				var got struct {
					RunID   string `json:"run_id"`
					BaseSeq int64  `json:"base_seq"`
				}
				if err := json.Unmarshal(raw, &got); err != nil {
					p.sendErrors = append(p.sendErrors, err.Error())
					return
				}
				p.runID, p.base = got.RunID, got.BaseSeq
				break
			}
			err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(raw)))
			if resp.StatusCode < 500 {
				p.sendErrors = append(p.sendErrors, "not retryable: "+err.Error())
				return
			}
		}
		p.sendErrors = append(p.sendErrors, err.Error())
		if ctx.Err() != nil {
			return
		}
		time.Sleep(retryPause)
	}
	s := c.Session(p.session)
	follow(ctx, s, p, s.EventsFrom(ctx, p.base), record)
}

// followCLIRun sends and follows with `keel run --once KEY --json`, as a
// script would: while the command exits without the run's terminal event
// (the frontend out of reach, its follow broken), it runs it again with
// the same once key, which follows the same run (docs/contract.md §11.7).
func followCLIRun(ctx context.Context, top *topology, p *progress, record func(*progress, keel.Envelope, error)) {
	p.viaCLI = true
	cfg := runConfig(p.session)
	args := []string{"run", "--address", top.frontend, "--namespace", devserver.DefaultNamespace,
		"--nats", top.natsURL, "--store", top.storeURL, "--session", p.session, "--once", p.session + "/send",
		"--model", cfg.Model, "--tools", strings.Join(cfg.Tools, ","), "--json", "go"}
	p.sent = time.Now()
	for ctx.Err() == nil {
		cmd := exec.CommandContext(ctx, top.keelBin, args...)
		cmd.Env = append(os.Environ(), top.storeEnv...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			p.sendErrors = append(p.sendErrors, "not retryable: "+err.Error())
			return
		}
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for sc.Scan() {
			var ev keel.Envelope
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			if p.runID == "" {
				p.runID = ev.RunID
			}
			if ev.RunID != p.runID {
				continue
			}
			record(p, ev, nil)
			if ev.Terminal() && p.terminal == nil {
				p.terminal, p.done = &ev, time.Now()
			}
		}
		err = cmd.Wait()
		// keel run reports lost deltas on stderr.
		for range strings.Count(stderr.String(), "live events missed") {
			record(p, keel.Envelope{}, &live.LaggedError{})
		}
		if p.terminal != nil {
			return
		}
		if p.runID == "" {
			p.sendErrors = append(p.sendErrors, fmt.Sprintf("keel run: %v: %s", err, tailStrings(strings.Split(strings.TrimSpace(stderr.String()), "\n"), 1)))
		} else {
			// It sent, then its follow broke: run again, it follows the
			// run from its start, and deltas streamed meanwhile are gone.
			p.resumes++
		}
		time.Sleep(retryPause)
	}
}
