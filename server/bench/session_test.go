package bench_test

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	sdkclient "go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/bench"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/store"
	"github.com/keelrun/keel/server/tool"
)

// readFileScript reads path in every run and answers "read it": two model
// calls a run, repeating, so one script plays a whole session.
func readFileScript(path string) string {
	return fmt.Sprintf(`{"repeat":true,"turns":[
  {"tool_calls":[{"id":"read","name":"read_file","arguments":{"path":%q}}],"usage":{"input_tokens":10,"output_tokens":2}},
  {"text":["read it"],"usage":{"input_tokens":20,"output_tokens":3}}
]}`, path)
}

const (
	longBigBytes   = 64 << 10 // what each run of the long session reads
	longBaseRuns   = 10       // runs of the baseline session (16-byte file)
	longWindowRuns = 10       // runs compared at the start and the end
	longAnswer     = "read it"
)

// longMemoryAt are the runs after which the memory is read besides the
// last: the shape of its growth.
var longMemoryAt = []int{longWindowRuns, 100, 300, 500}

type memoryPoint struct {
	run       int
	rss, heap uint64
}

// BenchmarkLongSession plays one session of b.N runs back to back (each a
// read_file of a 64 KiB file and an answer: two model calls, one tool call)
// on one embedded server (SQLite and the content store in a temporary
// directory) and one worker, with the default hand-over limits and
// compaction, and reports whether a session without end stays bounded.
// It checks that every run completes and counts the hand-overs; reads the
// history of every Session execution and every Run (the largest of each,
// and Run history bytes per model call against a baseline session in the
// same run whose runs read a 16-byte file); compares the wall time of the
// first 10 runs with the last 10; compares the Send latency of the first
// prompt of each new execution (sent right after the commit that made the
// session hand over) with all other sends; reads process RSS and Go heap
// in use (worker, server and client share the process) after runs 10,
// 100, 300, 500 and N, each after a GC that returns freed memory to the
// OS; times EventsAfter(0) over the whole log and checks it is dense and
// LastSeq long; and sizes the content store and the database on disk. It
// prints a table on stdout, and the timeline of the slowest run when it
// took over ten times the median. -benchtime 20x is a quick check.
//
//	go test -run '^$' -bench LongSession -benchtime 1000x -timeout 60m ./server/bench/
func BenchmarkLongSession(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 58*time.Minute)
	defer cancel()
	dataDir := b.TempDir()
	srv := keeltest.StartServer(b, devserver.Config{DataDir: dataDir})
	workspace := b.TempDir()
	big := strings.Repeat("0123456789abcdef", longBigBytes/16)
	small := "0123456789abcdef"
	for name, text := range map[string]string{"big.txt": big, "small.txt": small} {
		if err := os.WriteFile(filepath.Join(workspace, name), []byte(text), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	tools, err := tool.Builtins(workspace)
	if err != nil {
		b.Fatal(err)
	}
	book := &keeltest.ScriptBook{}
	bigModel := book.Add(b, "long-big", readFileScript("big.txt"))
	smallModel := book.Add(b, "long-small", readFileScript("small.txt"))
	keeltest.StartWorker(b, srv, keeltest.WorkerOptions{Models: book, Tools: tools})
	tc := keeltest.Dial(b, srv)
	c, err := client.Dial(ctx, client.Options{Temporal: tc,
		DataConverter: store.NewDataConverter(keeltest.Codec(b, srv)),
		Config:        api.RunConfig{Model: bigModel, Tools: []string{"read_file"}}})
	if err != nil {
		b.Fatal(err)
	}

	r := &longReport{}
	// The baseline: the same runs over a 16-byte file, in their own
	// session. They also warm up the server, worker and client.
	base := c.Session("long-baseline")
	for i := 1; i <= longBaseRuns; i++ {
		if _, _, err := longRun(ctx, base, fmt.Sprintf("baseline %d", i), client.WithConfig(api.RunConfig{Model: smallModel})); err != nil {
			b.Fatalf("baseline run %d: %v", i, err)
		}
	}

	sess := c.Session("long-session")
	n := 0
	for b.Loop() {
		n++
		r.starts = append(r.starts, time.Now())
		send, wall, err := longRun(ctx, sess, fmt.Sprintf("prompt %d", n))
		if err != nil {
			r.failure = fmt.Sprintf("run %d: %v", n, err)
			break
		}
		r.sends = append(r.sends, send)
		r.walls = append(r.walls, wall)
		if slices.Contains(longMemoryAt, n) {
			rss, heap := memoryNow()
			r.memory = append(r.memory, memoryPoint{n, rss, heap})
			if n == longWindowRuns {
				r.rss10, r.heap10 = rss, heap
			}
		}
	}
	r.runs = n
	r.rssN, r.heapN = memoryNow()
	if !slices.Contains(longMemoryAt, n) {
		r.memory = append(r.memory, memoryPoint{n, r.rssN, r.heapN})
	}
	if r.failure != "" {
		r.print(b)
		b.Fatal(r.failure)
	}

	st, err := sess.State(ctx)
	if err != nil {
		b.Fatalf("state: %v", err)
	}
	r.state = st

	// Session executions, from the first along the continue-as-new chain.
	r.execs, err = sessionExecutions(ctx, tc, sess.ID())
	if err != nil {
		b.Fatalf("session executions: %v", err)
	}
	// Every run of the long session, and of the baseline: run i is the
	// session's execution i (one execution per run).
	baseExecs, err := sessionExecutions(ctx, tc, base.ID())
	if err != nil {
		b.Fatalf("baseline executions: %v", err)
	}
	for _, side := range []struct {
		id    string
		execs []execHistory
		runs  int
		into  *[]runHist
	}{{sess.ID(), r.execs, n, &r.runHists}, {base.ID(), baseExecs, longBaseRuns, &r.baseHists}} {
		if len(side.execs) < side.runs {
			b.Fatalf("session %s: %d executions for %d runs", side.id, len(side.execs), side.runs)
		}
		for i := range side.runs {
			h, err := runHistory(ctx, tc, side.id, side.execs[i].runID)
			if err != nil {
				b.Fatalf("session %s run %d history: %v", side.id, i+1, err)
			}
			*side.into = append(*side.into, h)
		}
	}

	// The whole log through EventsAfter.
	start := time.Now()
	log, err := sess.EventsAfter(ctx, 0)
	r.eventsElapsed = time.Since(start)
	r.events = len(log)
	if err != nil {
		r.logProblems = append(r.logProblems, fmt.Sprintf("EventsAfter: %v", err))
	}
	r.logProblems = append(r.logProblems, checkLongLog(log, st.LastSeq, big)...)

	r.storeBytes, r.storeFiles = dirSize(filepath.Join(dataDir, "store"))
	for _, name := range []string{devserver.DatabaseFile, devserver.DatabaseFile + "-wal"} {
		if fi, err := os.Stat(filepath.Join(dataDir, name)); err == nil {
			r.dbBytes += fi.Size()
		}
	}
	r.print(b)
	r.explainSlowest(ctx, tc, sess.ID())
	if len(r.logProblems) > 0 {
		b.Errorf("EventsAfter: %s", strings.Join(r.logProblems, "; "))
	}
}

// longRun sends a prompt and waits for its outcome, which must be the
// script's answer. It returns the time Send took and the whole run's.
func longRun(ctx context.Context, sess *client.Session, prompt string, opts ...client.SendOption) (send, wall time.Duration, err error) {
	start := time.Now()
	run, err := sess.Send(ctx, prompt, opts...)
	send = time.Since(start)
	if err != nil {
		return send, 0, fmt.Errorf("send: %w", err)
	}
	out, err := run.Outcome(ctx)
	wall = time.Since(start)
	if err != nil {
		return send, wall, fmt.Errorf("outcome of %s: %w", run.ID, err)
	}
	if out.Status != keel.StatusCompleted || out.Text != longAnswer {
		return send, wall, fmt.Errorf("outcome of %s: status %s, text %q", run.ID, out.Status, out.Text)
	}
	return send, wall, nil
}

// memoryNow returns the process's resident set (VmRSS) and the Go heap in
// use, after a GC that returns freed memory to the OS.
func memoryNow() (rss, heap uint64) {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	data, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for line := range strings.Lines(string(data)) {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				rss = kb << 10
			}
		}
	}
	return rss, ms.HeapInuse
}

// execHistory is one Session execution's history.
type execHistory struct {
	runID       string
	events      int
	bytes       int64 // sum of proto.Size of its events
	temporal    int64 // Temporal's own count (HistorySizeBytes)
	firstRun    int   // number of the first Run it started, 0 if none
	runsStarted int
	next        string // run ID it continued as, "" for the last
}

// sessionExecutions reads every execution of a session: the first one's
// run ID from the current one's start event, then forward along each
// continued-as-new event.
func sessionExecutions(ctx context.Context, tc sdkclient.Client, id string) ([]execHistory, error) {
	it := tc.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return nil, fmt.Errorf("session %s has no history", id)
	}
	first, err := it.Next()
	if err != nil {
		return nil, err
	}
	runID := first.GetWorkflowExecutionStartedEventAttributes().GetFirstExecutionRunId()
	var out []execHistory
	for runID != "" {
		h := execHistory{runID: runID}
		err := eachEvent(ctx, tc, id, runID, func(ev *historypb.HistoryEvent) {
			h.events++
			h.bytes += int64(proto.Size(ev))
			if a := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
				h.runsStarted++
				if h.firstRun == 0 {
					_, num, _ := strings.Cut(a.GetWorkflowId(), "/run-")
					h.firstRun, _ = strconv.Atoi(num)
				}
			}
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				h.next = a.GetNewExecutionRunId()
			}
		})
		if err != nil {
			return out, fmt.Errorf("execution %d (%s): %w", len(out)+1, runID, err)
		}
		if d, err := tc.DescribeWorkflowExecution(ctx, id, runID); err == nil {
			h.temporal = d.GetWorkflowExecutionInfo().GetHistorySizeBytes()
		}
		out = append(out, h)
		runID = h.next
	}
	return out, nil
}

// runHist is the history of the execution that ran one run.
type runHist struct {
	events      int
	bytes       int64
	modelCalls  int // ModelTurn and Compact activities scheduled
	compactions int
}

func runHistory(ctx context.Context, tc sdkclient.Client, id, runID string) (runHist, error) {
	var h runHist
	err := eachEvent(ctx, tc, id, runID, func(ev *historypb.HistoryEvent) {
		h.events++
		h.bytes += int64(proto.Size(ev))
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			switch a.GetActivityType().GetName() {
			case activities.ModelTurnName:
				h.modelCalls++
			case activities.CompactName:
				h.modelCalls++
				h.compactions++
			}
		}
	})
	return h, err
}

func eachEvent(ctx context.Context, tc sdkclient.Client, id, runID string, f func(*historypb.HistoryEvent)) error {
	it := tc.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return err
		}
		f(ev)
	}
	return nil
}

// checkLongLog checks that the log holds lastSeq events, dense from seq 1,
// and that every tool result reads back whole.
func checkLongLog(log []keel.Envelope, lastSeq int64, big string) []string {
	var problems []string
	if int64(len(log)) != lastSeq {
		problems = append(problems, fmt.Sprintf("%d events, LastSeq %d", len(log), lastSeq))
	}
	for i, ev := range log {
		if ev.Seq != int64(i+1) {
			problems = append(problems, fmt.Sprintf("not dense: index %d has seq %d", i, ev.Seq))
			break
		}
	}
	bad := 0
	for _, ev := range log {
		if ev.Type != keel.TypeToolFinished {
			continue
		}
		e, err := ev.Event()
		if tf, ok := e.(keel.ToolFinished); err != nil || !ok || tf.Output != big {
			bad++
		}
	}
	if bad > 0 {
		problems = append(problems, fmt.Sprintf("%d tool results do not read back whole", bad))
	}
	return problems
}

// dirSize sums the sizes of the files under dir (allocated blocks, as du).
func dirSize(dir string) (bytes int64, files int) {
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		files++
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			bytes += st.Blocks * 512
		} else {
			bytes += fi.Size()
		}
		return nil
	})
	return bytes, files
}

// longReport gathers the figures of BenchmarkLongSession.
type longReport struct {
	runs          int
	failure       string
	sends, walls  bench.Latencies
	starts        []time.Time
	rss10, heap10 uint64
	rssN, heapN   uint64
	memory        []memoryPoint
	state         api.SessionStatus
	execs         []execHistory
	runHists      []runHist
	baseHists     []runHist
	events        int
	eventsElapsed time.Duration
	logProblems   []string
	storeBytes    int64
	storeFiles    int
	dbBytes       int64
}

// perCall returns the mean and largest Run history bytes per model call,
// and the total model calls and compactions.
func perCall(hs []runHist) (mean, largest float64, calls, compactions int) {
	var bytes int64
	for _, h := range hs {
		bytes += h.bytes
		calls += h.modelCalls
		compactions += h.compactions
		if h.modelCalls > 0 {
			largest = max(largest, float64(h.bytes)/float64(h.modelCalls))
		}
	}
	if calls > 0 {
		mean = float64(bytes) / float64(calls)
	}
	return mean, largest, calls, compactions
}

func (r *longReport) print(b *testing.B) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }
	kb := func(v float64) string { return fmt.Sprintf("%.1f KB", v/1000) }
	mb := func(v float64) string { return fmt.Sprintf("%.2f MB", v/1e6) }
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	rows := [][3]string{}
	row := func(metric, value, target string) { rows = append(rows, [3]string{metric, value, target}) }

	completed := fmt.Sprintf("%d of %d", len(r.walls), r.runs)
	if r.failure != "" {
		completed += " (failed: " + r.failure + ")"
	}
	row("runs completed", completed, "all")
	if r.state.Runs > 0 {
		row("hand-overs (State().HandOvers)", fmt.Sprintf("%d (%d executions read)", r.state.HandOvers, len(r.execs)), "")
	}

	// Histories.
	if len(r.execs) > 0 {
		var largest execHistory
		for _, e := range r.execs {
			if e.bytes > largest.bytes {
				largest = e
			}
		}
		row("largest Session execution history", fmt.Sprintf("%s, %d events (Temporal: %s)",
			mb(float64(largest.bytes)), largest.events, mb(float64(largest.temporal))), "≤ 10 MB")
		b.ReportMetric(float64(largest.bytes)/1e6, "session-hist-MB")
	}
	if len(r.runHists) > 0 {
		var largest runHist
		for _, h := range r.runHists {
			if h.bytes > largest.bytes {
				largest = h
			}
		}
		row("largest Run history", fmt.Sprintf("%s, %d events, %d model calls",
			kb(float64(largest.bytes)), largest.events, largest.modelCalls), "≤ 2 MB")
		b.ReportMetric(float64(largest.bytes)/1e3, "run-hist-KB")

		mean, most, calls, compactions := perCall(r.runHists)
		bmean, bmost, _, _ := perCall(r.baseHists)
		row("Run history per model call, 64 KiB result (mean / largest)",
			fmt.Sprintf("%s / %s (%d calls, %d of them compactions)", kb(mean), kb(most), calls, compactions), "≤ 8 KB, flat")
		row("Run history per model call, 16-byte result (baseline, mean / largest)",
			fmt.Sprintf("%s / %s (%d runs)", kb(bmean), kb(bmost), len(r.baseHists)), "")
		row("per call, 64 KiB result over 16-byte result", fmt.Sprintf("%.2f× (%+.1f KB)", ratio(mean, bmean), (mean-bmean)/1000), "")
		w := min(longWindowRuns, len(r.runHists))
		first, _, _, _ := perCall(r.runHists[:w])
		last, _, _, _ := perCall(r.runHists[len(r.runHists)-w:])
		row(fmt.Sprintf("per call, runs 1–%d → last %d", w, w), fmt.Sprintf("%s → %s (%.2f×)", kb(first), kb(last), ratio(last, first)), "flat")
		b.ReportMetric(mean/1e3, "KB/call")
		b.ReportMetric(bmean/1e3, "base-KB/call")
	}

	// Wall time.
	if n := len(r.walls); n > 0 {
		w := min(longWindowRuns, n)
		first, last := r.walls[:w].Mean(), r.walls[n-w:].Mean()
		row(fmt.Sprintf("run wall time, mean of runs 1–%d → runs %d–%d", w, n-w+1, n),
			fmt.Sprintf("%s → %s (%.2f×)", ms(first), ms(last), ratio(float64(last), float64(first))), "≤ 1.3×")
		b.ReportMetric(ratio(float64(last), float64(first)), "wall-ratio")
		first, last = r.walls[:w].P50(), r.walls[n-w:].P50()
		row(fmt.Sprintf("run wall time, median of runs 1–%d → runs %d–%d", w, n-w+1, n),
			fmt.Sprintf("%s → %s (%.2f×)", ms(first), ms(last), ratio(float64(last), float64(first))), "")
		if n >= 200 {
			first, last := r.walls[:100].P50(), r.walls[n-100:].P50()
			row(fmt.Sprintf("run wall time, median of runs 1–100 → runs %d–%d", n-99, n),
				fmt.Sprintf("%s → %s (%.2f×)", ms(first), ms(last), ratio(float64(last), float64(first))), "")
		}
		var slow []string
		for i, d := range r.walls {
			if d > time.Second {
				slow = append(slow, fmt.Sprintf("run %d: %.1f s", i+1, d.Seconds()))
			}
		}
		slowText := "none"
		if len(slow) > 0 {
			slowText = fmt.Sprintf("%d (%s)", len(slow), strings.Join(slow, ", "))
		}
		row("runs over 1 s", slowText, "")
		slowest := 0
		for i, d := range r.walls {
			if d > r.walls[slowest] {
				slowest = i
			}
		}
		row("run wall time, all runs (p50 / p99 / max)", fmt.Sprintf("%s / %s / %s (run %d)",
			ms(r.walls.P50()), ms(r.walls.P99()), ms(r.walls[slowest]), slowest+1), "")
	}

	// Sends right after a hand-over against the others (run 1, which
	// starts the session, in neither).
	if len(r.execs) > 0 && len(r.sends) > 0 {
		after := map[int]bool{}
		for _, e := range r.execs[1:] {
			if e.firstRun > 0 {
				after[e.firstRun] = true
			}
		}
		var handOver, other bench.Latencies
		for i, d := range r.sends {
			switch {
			case i == 0:
			case after[i+1]:
				handOver = append(handOver, d)
			default:
				other = append(other, d)
			}
		}
		row("Send, first of a new execution (p50 / p99)", fmt.Sprintf("%s / %s (%d sends)",
			ms(handOver.P50()), ms(handOver.P99()), len(handOver)), "")
		row("Send, all others (p50 / p99)", fmt.Sprintf("%s / %s (%d sends)", ms(other.P50()), ms(other.P99()), len(other)), "")
		row("added by a hand-over (p50 / p99)", ms(handOver.P50()-other.P50())+" / "+ms(handOver.P99()-other.P99()), "")
		b.ReportMetric(float64(handOver.P50())/1e6, "send-handover-p50-ms")
		b.ReportMetric(float64(other.P50())/1e6, "send-other-p50-ms")
	}

	// Memory.
	if r.rss10 > 0 {
		row(fmt.Sprintf("process RSS after run %d → run %d", longWindowRuns, r.runs),
			fmt.Sprintf("%s → %s (%.2f×)", mb(float64(r.rss10)), mb(float64(r.rssN)), ratio(float64(r.rssN), float64(r.rss10))), "no growth")
		row(fmt.Sprintf("Go heap in use after run %d → run %d", longWindowRuns, r.runs),
			fmt.Sprintf("%s → %s (%.2f×)", mb(float64(r.heap10)), mb(float64(r.heapN)), ratio(float64(r.heapN), float64(r.heap10))), "no growth")
		var rss, heap []string
		for _, m := range r.memory {
			rss = append(rss, fmt.Sprintf("%d: %.0f", m.run, float64(m.rss)/1e6))
			heap = append(heap, fmt.Sprintf("%d: %.0f", m.run, float64(m.heap)/1e6))
		}
		row("process RSS by run (MB)", strings.Join(rss, ", "), "")
		row("Go heap in use by run (MB)", strings.Join(heap, ", "), "")
		b.ReportMetric(ratio(float64(r.rssN), float64(r.rss10)), "rss-ratio")
		b.ReportMetric(ratio(float64(r.heapN), float64(r.heap10)), "heap-ratio")
	}

	// The log.
	if r.events > 0 || len(r.logProblems) > 0 {
		check := "dense, LastSeq events, every tool result whole"
		if len(r.logProblems) > 0 {
			check = "PROBLEM: " + strings.Join(r.logProblems, "; ")
		}
		rate := float64(r.events) / r.eventsElapsed.Seconds()
		row("EventsAfter(0), whole log", fmt.Sprintf("%d events (LastSeq %d) in %s: %.0f events/s; %s",
			r.events, r.state.LastSeq, ms(r.eventsElapsed), rate, check), "")
		b.ReportMetric(rate, "events/s")
	}
	if r.storeFiles > 0 || r.dbBytes > 0 {
		row("on disk: content store / SQLite (+WAL)", fmt.Sprintf("%s in %d objects / %s",
			mb(float64(r.storeBytes)), r.storeFiles, mb(float64(r.dbBytes))), "")
		if runs := r.runs + longBaseRuns; runs > 0 {
			row("content store per run (both sessions)", kb(float64(r.storeBytes)/float64(runs)), "")
		}
	}

	fmt.Printf("\nBenchmarkLongSession: one session, %d runs (64 KiB read_file + answer each)\n\n", r.runs)
	fmt.Println("| metric | value | target |")
	fmt.Println("|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s |\n", r[0], r[1], r[2])
	}
	fmt.Println()
}

// explainSlowest prints where the time of the slowest run went when it took
// over ten times the median: the events of its Run workflow and of the
// Session execution that ran it, timed from its Send.
func (r *longReport) explainSlowest(ctx context.Context, tc sdkclient.Client, session string) {
	if len(r.walls) == 0 {
		return
	}
	k := 0
	for i, d := range r.walls {
		if d > r.walls[k] {
			k = i
		}
	}
	if r.walls[k] < 10*r.walls.P50() {
		return
	}
	number, start := k+1, r.starts[k]
	end := start.Add(r.walls[k])
	type line struct {
		at   time.Duration
		text string
	}
	var lines []line
	describe := func(who string, ev *historypb.HistoryEvent) {
		at := ev.GetEventTime().AsTime()
		if at.Before(start.Add(-time.Second)) || at.After(end.Add(time.Second)) {
			return
		}
		what := ev.GetEventType().String()
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			what += " " + a.GetActivityType().GetName()
		}
		if a := ev.GetMarkerRecordedEventAttributes(); a != nil {
			what += " " + a.GetMarkerName()
		}
		lines = append(lines, line{at.Sub(start), fmt.Sprintf("%+9.1f ms  %-7s #%-4d %s", float64(at.Sub(start))/1e6, who, ev.GetEventId(), what)})
	}
	_ = eachEvent(ctx, tc, keel.RunID(session, number), "", func(ev *historypb.HistoryEvent) { describe("run", ev) })
	for _, e := range r.execs {
		if e.firstRun > 0 && e.firstRun <= number+1 && number <= e.firstRun+e.runsStarted {
			_ = eachEvent(ctx, tc, session, e.runID, func(ev *historypb.HistoryEvent) { describe("session", ev) })
		}
	}
	slices.SortStableFunc(lines, func(a, b line) int { return cmp.Compare(a.at, b.at) })
	var text []string
	for _, l := range lines {
		text = append(text, l.text)
	}
	fmt.Printf("slowest run %d took %v (p50 %v); its events and its session's, from its Send:\n%s\n\n",
		number, r.walls[k].Round(time.Millisecond), r.walls.P50().Round(time.Millisecond), strings.Join(text, "\n"))
}
