package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/gateway"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// The benchmarks' readers run in a child process (the test binary again,
// with readerEnv set), so the gateway's figures are those of a client in
// another process, and the gateway process's heap holds no client side.
const readerEnv = "KEEL_GATEWAY_BENCH_READER"

// benchSessions numbers the benchmarks' sessions, unique in the process
// however often the benchmarks run (-count).
var benchSessions atomic.Int64

var subscribers = flag.Int("subscribers", 1000, "event streams BenchmarkSubscribers opens")

// latencies are durations with percentiles.
type latencies []time.Duration

func (l latencies) pct(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p/100))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkEventLatency measures deltas from the worker's publish (the
// envelope's At) to a client in another process: read from the gateway's
// event stream, and, in the same run and process, straight from NATS.
// Each iteration is one run of 100 deltas 3 ms apart.
func BenchmarkEventLatency(b *testing.B) {
	const chunks = 100
	var text []string
	for i := range chunks {
		text = append(text, strconv.Quote(fmt.Sprintf("word%d ", i)))
	}
	s := startGateway(b, gateway.Options{})
	var sse, direct latencies
	for b.Loop() {
		session := fmt.Sprintf("latency-%d", benchSessions.Add(1))
		gate := session
		m := model(b, `{"chunk_delay":"3ms","turns":[
		  {"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"`+gate+`"}}]},
		  {"text":[`+strings.Join(text, ",")+`]}]}`)
		run := s.send(b, session, map[string]any{"prompt": "go", "model": m, "tools": []string{"gate"}})
		r := startReader(b, "latency", s.srv.URL, session, itoa(run.BaseSeq), strconv.Itoa(chunks))
		r.ready(b)
		shared.gates.open(gate)
		for _, line := range r.lines(b) {
			kind, v, _ := strings.Cut(line, " ")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch kind {
			case "sse":
				sse = append(sse, time.Duration(n))
			case "nats":
				direct = append(direct, time.Duration(n))
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(ms(sse.pct(50)), "sse-p50-ms")
	b.ReportMetric(ms(sse.pct(99)), "sse-p99-ms")
	b.ReportMetric(ms(direct.pct(50)), "nats-p50-ms")
	b.ReportMetric(ms(direct.pct(99)), "nats-p99-ms")
	b.Logf("deltas: %d via the gateway, %d via NATS; gateway / NATS: p50 %.2f×, p99 %.2f×", len(sse), len(direct),
		float64(sse.pct(50))/float64(direct.pct(50)), float64(sse.pct(99))/float64(direct.pct(99)))
}

// BenchmarkSubscribers opens -subscribers event streams on one gateway
// (all on one session, whose run has ended), from a child process, and
// reports the gateway process's heap and goroutines per stream, and the
// time one delta takes to reach all of them.
func BenchmarkSubscribers(b *testing.B) {
	n := *subscribers
	// Every stream comes from one process on one address: no per-client
	// limit.
	s := startGateway(b, gateway.Options{MaxStreamsPerAddr: -1})
	session := fmt.Sprintf("subscribers-%d", benchSessions.Add(1))
	s.send(b, session, map[string]any{"prompt": "hi", "model": model(b, `{"turns":[{"text":["hi"]}]}`)})
	waitForEvent(b, testCtx(b), session, keel.TypeRunCompleted, 1)
	pub := keeltest.DialNATS(b, shared.nats.ClientURL(), live.NATSOptions{})
	for b.Loop() {
		// The previous iteration's streams end as the server notices
		// their connections closed.
		for wait := testCtx(b); s.gw.Streams() > 0 && wait.Err() == nil; {
			runtime.Gosched()
		}
		baseCPU := idleCPU(b, 3*time.Second)
		before := heap()
		goroutines := runtime.NumGoroutine()
		r := startReader(b, "subscribers", s.srv.URL, session, "0", strconv.Itoa(n))
		start := time.Now()
		r.ready(b)
		opened := time.Since(start)
		if got := s.gw.Streams(); got != n {
			b.Fatalf("%d streams open, want %d", got, n)
		}
		after := heap()
		perStream := float64(after-before) / float64(n)
		perGoroutines := float64(runtime.NumGoroutine()-goroutines) / float64(n)
		idle := idleCPU(b, 3*time.Second)

		env, _ := keel.Seal(keel.TextDelta{Step: 1, Attempt: 1, Text: "fan-out"}, session, session+"/run-1", time.Now())
		env.AfterSeq = 1
		if err := pub.Publish(context.Background(), env); err != nil {
			b.Fatal(err)
		}
		var fan latencies
		for _, line := range r.lines(b) {
			if v, ok := strings.CutPrefix(line, "sse "); ok {
				d, _ := strconv.ParseInt(v, 10, 64)
				fan = append(fan, time.Duration(d))
			}
		}
		if len(fan) != n {
			b.Fatalf("the delta reached %d of %d streams", len(fan), n)
		}
		b.ReportMetric(perStream/1024, "heap-KiB/stream")
		b.ReportMetric(perGoroutines, "goroutines/stream")
		b.ReportMetric(idle*100, "idle-cpu-%")
		b.ReportMetric(baseCPU*100, "idle-cpu-no-streams-%")
		b.ReportMetric(ms(fan.pct(50)), "fanout-p50-ms")
		b.ReportMetric(ms(fan.pct(99)), "fanout-p99-ms")
		b.ReportMetric(ms(fan.pct(100)), "fanout-max-ms")
		b.Logf("%d streams opened in %v; heap %.1f → %.1f MiB (%.1f KiB a stream), %.1f goroutines a stream; "+
			"idle, this process (gateway, worker, Temporal, NATS) used %.0f%% of a core (%.0f%% without streams); one delta reached all in %v (p50 %v)",
			n, opened.Round(time.Millisecond), float64(before)/(1<<20), float64(after)/(1<<20), perStream/1024, perGoroutines,
			idle*100, baseCPU*100, fan.pct(100).Round(time.Microsecond), fan.pct(50).Round(time.Microsecond))
	}
}

// idleCPU is the share of one core this process used over d while the
// streams were open and nothing happened.
func idleCPU(b *testing.B, d time.Duration) float64 {
	b.Helper()
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start, wall := cpu(), time.Now()
	time.Sleep(d) // a measuring window, not a wait for an event
	return float64(cpu()-start) / float64(time.Since(wall))
}

// heap is the live heap after a collection.
func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// reader is a child process reading event streams.
type reader struct {
	cmd *exec.Cmd
	out *bufio.Scanner
}

func startReader(b *testing.B, mode, url, session, after, count string) *reader {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), readerEnv+"="+strings.Join([]string{mode, url, session, after, count, shared.nats.ClientURL()}, " "))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return &reader{cmd: cmd, out: sc}
}

// ready waits for the reader's "ready" line: its streams are open.
func (r *reader) ready(b *testing.B) {
	b.Helper()
	for r.out.Scan() {
		if r.out.Text() == "ready" {
			return
		}
	}
	b.Fatalf("reader ended before it was ready: %v", r.out.Err())
}

// lines returns the rest of the reader's output once it exits.
func (r *reader) lines(b *testing.B) []string {
	b.Helper()
	var out []string
	for r.out.Scan() {
		out = append(out, r.out.Text())
	}
	if err := r.cmd.Wait(); err != nil {
		b.Fatalf("reader: %v", err)
	}
	return out
}

// runReader is the child process: it opens its streams, prints "ready",
// and prints one latency a line ("sse NANOS", "nats NANOS") until done.
func runReader(spec string) int {
	f := strings.Fields(spec)
	mode, url, session, after, natsURL := f[0], f[1], f[2], f[3], f[5]
	// count is the number of streams, or for "latency" (one stream) the
	// number of deltas to expect.
	count, _ := strconv.Atoi(f[4])
	expect := 0
	if mode == "latency" {
		count, expect = 1, count
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	emit := func(kind string, d time.Duration) {
		mu.Lock()
		fmt.Fprintf(out, "%s %d\n", kind, d.Nanoseconds())
		mu.Unlock()
	}
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "reader:", err); return 1 }
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: count, MaxConnsPerHost: 0}}

	var natsDone chan struct{}
	if mode == "latency" {
		ch, err := live.DialNATS(natsURL, live.NATSOptions{})
		if err != nil {
			return fail(err)
		}
		defer ch.Close()
		sub, err := ch.Subscribe(ctx, session, live.SubscribeOptions{})
		if err != nil {
			return fail(err)
		}
		natsDone = make(chan struct{})
		nctx, ncancel := context.WithCancel(ctx)
		defer func() { ncancel(); <-natsDone }()
		go func() {
			defer close(natsDone)
			for seen := 0; seen < expect; {
				env, err := sub.Next(nctx)
				if err != nil {
					return
				}
				if env.Type == keel.TypeTextDelta {
					emit("nats", time.Since(env.At))
					seen++
				}
			}
		}()
	}
	// Open the streams in batches, so the server is not flooded.
	streams := make([]*bufio.Reader, count)
	const batch = 50
	for lo := 0; lo < count; lo += batch {
		var wg sync.WaitGroup
		errs := make(chan error, batch)
		for i := lo; i < min(lo+batch, count); i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/sessions/"+session+"/events?after="+after, nil)
				req.Header.Set("Accept", "text/event-stream")
				resp, err := hc.Do(req)
				if err != nil {
					errs <- err
					return
				}
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("stream: status %d", resp.StatusCode)
					return
				}
				rd := bufio.NewReader(resp.Body)
				// Wait for a durable event of the replay: the stream's
				// live subscription is open by then.
				marker := keel.TypeToolStarted
				if mode == "subscribers" {
					marker = keel.TypeRunCompleted
				}
				if err := readUntil(rd, "event: "+marker); err != nil {
					errs <- err
					return
				}
				streams[i] = rd
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			return fail(err)
		}
	}
	fmt.Fprintln(out, "ready")
	out.Flush()

	var wg sync.WaitGroup
	for _, rd := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ev, err := readSSE(rd)
				if err != nil {
					return
				}
				if ev.event == keel.TypeTextDelta {
					var env keel.Envelope
					if json.Unmarshal([]byte(ev.data), &env) == nil {
						emit("sse", time.Since(env.At))
					}
					if mode == "subscribers" {
						return
					}
				}
				if mode == "latency" && ev.event == keel.TypeRunCompleted {
					return
				}
			}
		}()
	}
	wg.Wait()
	if natsDone != nil {
		// NATS may still hold the last deltas; they were sent before the
		// run completed.
		select {
		case <-natsDone:
		case <-time.After(2 * time.Second):
			fmt.Fprintln(os.Stderr, "reader: NATS did not deliver every delta")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if err := out.Flush(); err != nil {
		return fail(err)
	}
	return 0
}

// readUntil reads a stream up to the line; a stream_error event on the
// way is the error.
func readUntil(rd *bufio.Reader, line string) error {
	failed := false
	for {
		l, err := rd.ReadString('\n')
		if err != nil {
			return err
		}
		l = strings.TrimSuffix(l, "\n")
		if failed {
			return fmt.Errorf("stream: %s", l)
		}
		failed = l == "event: "+gateway.EventStreamError
		if l == line {
			return nil
		}
	}
}

func readSSE(rd *bufio.Reader) (sseEvent, error) {
	st := &sseStream{rd: rd}
	return st.next()
}
