package bench

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"
)

// ConcurrencyReport is what MeasureConcurrency measured.
type ConcurrencyReport struct {
	// ModelTime is how long a run's model streams in all; Turns how long
	// each of its model turns does (the baseline's activities the same).
	ModelTime time.Duration
	Turns     []time.Duration
	// CancelFraction is ConcurrencyOptions.CancelFraction.
	CancelFraction float64
	// WorkerProcess says the workers ran in processes of their own, so
	// their CPU time is apart from the server's.
	WorkerProcess bool
	// RemoteCodec is ConcurrencyOptions.RemoteCodec.
	RemoteCodec bool
	// Revision is the VCS revision of the binary, "" if unknown; Load the
	// one-minute load average at the start, "" if unknown.
	Revision, Load string
	// Points holds one measurement per number of sessions.
	Points []ConcurrencyPoint
}

// ConcurrencyPoint is one number of concurrent sessions, measured on keel
// and on the bare baselines on the same server.
type ConcurrencyPoint struct {
	Sessions       int
	Keel, Baseline PhaseFigures
	// BaselineUWS is the bare baseline driven as a foreign client drives
	// keel: each workflow started by an update-with-start whose update it
	// accepts at once, the call waiting for the acceptance, then its
	// result. Its calls are the fair baseline of a send.
	BaselineUWS PhaseFigures
	// Foreign is keel driven as a client in another language would
	// (update-with-start of "send", then the "outcome" update), when
	// ConcurrencyOptions.Foreign asked for it.
	Foreign *PhaseFigures
	// Shaped is the shaped baseline (bare Temporal in keel's shape; see
	// shapeSessionWorkflow), when ConcurrencyOptions.Shaped asked for it.
	Shaped *PhaseFigures
}

// PhaseFigures are what one side of a measurement took.
type PhaseFigures struct {
	// Runs: each completed run, from the send (keel) or start (baseline)
	// call to its outcome. Starts: each send or start call. Cancels: from
	// each cancel call to the cancelled outcome.
	Runs, Starts, Cancels Latencies
	// How the sessions ended: completed, cancelled as planned, to be
	// cancelled but completed first, failed (Errors holds the first few).
	Completed, Cancelled, CancelMissed, Failed int
	Errors                                     []string
	// Wall is from the first start to the last outcome.
	Wall time.Duration
	// Server is what the server counted meanwhile; ClientRPCs the calls
	// of the benchmark's own clients among them (sends, outcomes, cancels),
	// so the rest came from the worker.
	Server     ServerSnapshot
	ClientRPCs Counts
	// ServerTimes are how long the frontend took to answer each call, by
	// method (long polls as long as they waited).
	ServerTimes map[string]Latencies
	// ServerCPU is this process's CPU time meanwhile: the Temporal server,
	// the NATS server and the benchmark's clients (as `keel dev` hosts
	// Temporal and NATS in one process), and the workers when they run in
	// this process.
	// WorkerCPU is the worker process's. Each is valid only if Known.
	ServerCPU, WorkerCPU           time.Duration
	ServerCPUKnown, WorkerCPUKnown bool
	// StreamActivity is the activity type that streams: keel's model turn,
	// the baseline's sleeping activity.
	StreamActivity string
	// StreamTurns counts the streaming activities that ran, cancelled
	// runs' too, and StreamTime how long they ran in all, from their
	// ActivityTaskStarted to their close in the histories.
	StreamTurns int64
	StreamTime  time.Duration
	// History sums the completed runs' histories.
	History HistoryFigures
}

// errors are f's errors; none when f was not measured.
func (f *PhaseFigures) errors() []string {
	if f == nil {
		return nil
	}
	return f.Errors
}

// Sessions is the number of sessions (runs) of the measurement.
func (f PhaseFigures) Sessions() int { return f.Completed + f.Cancelled + f.CancelMissed + f.Failed }

// Heartbeats is the number of heartbeats the server received from the
// streaming activities (StreamActivity).
func (f PhaseFigures) Heartbeats() int64 { return f.Server.Heartbeats[f.StreamActivity] }

// HeartbeatsPerTurn is heartbeats per streaming model turn.
func (f PhaseFigures) HeartbeatsPerTurn() float64 {
	if f.StreamTurns <= 0 {
		return 0
	}
	return float64(f.Heartbeats()) / float64(f.StreamTurns)
}

// HeartbeatsPerSecond is heartbeats per second of a streaming turn.
func (f PhaseFigures) HeartbeatsPerSecond() float64 {
	if f.StreamTime <= 0 {
		return 0
	}
	return float64(f.Heartbeats()) / f.StreamTime.Seconds()
}

// isTaskCount names the counters of polls that returned a task, which
// are already counted under their method.
func isTaskCount(name string) bool { return strings.HasSuffix(name, " (task)") }

// RPCsPerRun is the frontend's calls per session.
func (f PhaseFigures) RPCsPerRun() float64 {
	return per(f.Server.RPCs.Matching(func(k string) bool { return !isTaskCount(k) }), f.Sessions())
}

// PersistencePerRun is persistence requests per session, all and writes.
func (f PhaseFigures) PersistencePerRun() (all, writes float64) {
	return per(f.Server.Persistence.Total(), f.Sessions()), per(f.Server.Persistence.Matching(PersistenceWrite), f.Sessions())
}

// ActionsPerRun is billable actions per session, as the server's own
// action counter counts them (ServerSnapshot.Actions).
func (f PhaseFigures) ActionsPerRun() float64 { return per(f.Server.Actions.Total(), f.Sessions()) }

// CPUPerRun is the CPU seconds per session of the server's process and
// of the worker's, each -1 when unknown.
func (f PhaseFigures) CPUPerRun() (server, worker float64) {
	server, worker = -1, -1
	if n := f.Sessions(); n > 0 {
		if f.ServerCPUKnown {
			server = f.ServerCPU.Seconds() / float64(n)
		}
		if f.WorkerCPUKnown {
			worker = f.WorkerCPU.Seconds() / float64(n)
		}
	}
	return server, worker
}

// RunRatios are keel's run p50 and p99 over the baseline's.
func (p ConcurrencyPoint) RunRatios() (p50, p99 float64) {
	return ratio(p.Keel.Runs.P50(), p.Baseline.Runs.P50()), ratio(p.Keel.Runs.P99(), p.Baseline.Runs.P99())
}

// SendRatio is keel's send p99 over the bare update-with-start's p99.
func (p ConcurrencyPoint) SendRatio() float64 {
	return ratio(p.Keel.Starts.P99(), p.BaselineUWS.Starts.P99())
}

// ForeignRatios are the foreign-client path's run p50 and p99 over the
// update-with-start baseline's, and its send p99 over that baseline's
// update-with-start p99; zeros when it was not measured.
func (p ConcurrencyPoint) ForeignRatios() (run50, run99, send99 float64) {
	f, u := p.Foreign, p.BaselineUWS
	if f == nil {
		return 0, 0, 0
	}
	return ratio(f.Runs.P50(), u.Runs.P50()), ratio(f.Runs.P99(), u.Runs.P99()), ratio(f.Starts.P99(), u.Starts.P99())
}

// ActionRatios are keel's billable actions per run over the bare
// baseline's and over the shaped one's (0 when it was not measured).
func (p ConcurrencyPoint) ActionRatios() (overBare, overShaped float64) {
	k := p.Keel.ActionsPerRun()
	overBare = ratioF(k, p.Baseline.ActionsPerRun())
	if p.Shaped != nil {
		overShaped = ratioF(k, p.Shaped.ActionsPerRun())
	}
	return overBare, overShaped
}

// The targets of a thousand concurrent streaming sessions.
const (
	TargetAllCompleteAt    = 1000
	TargetRatioAt          = 500
	TargetRunP50Ratio      = 1.25
	TargetRunP99Ratio      = 1.5
	TargetLargeAt          = 1000 // where run p50 may be TargetRunP50RatioLarge
	TargetRunP50RatioLarge = 1.3
	// TargetSendP99Ratio bounds a send's p99 over the bare
	// update-with-start's, at every number of sessions.
	TargetSendP99Ratio    = 1.5
	TargetSendP99         = time.Second
	TargetHeartbeatsPerS  = 1.0
	TargetCancelP99       = 500 * time.Millisecond
	TargetExtraActions    = 3 // billable actions a run beyond the bare workflow's
	targetEverySessionCnt = 0
)

// ConcurrencyTarget is one target and how a measurement is judged.
type ConcurrencyTarget struct {
	// Text states the target.
	Text string
	// Sessions is the number of sessions it is judged at; 0 means at
	// every number measured (all must meet it).
	Sessions int
	// Met judges one measurement; applies says whether it has the samples
	// to be judged.
	Met     func(ConcurrencyPoint) (met, applies bool)
	Measure func(ConcurrencyPoint) string
}

// clientPath is a way clients drive keel, judged against the bare
// baseline driven alike.
type clientPath struct {
	// prefix heads its targets' texts; bareName names its baseline.
	prefix, bareName string
	// side is its measurement, nil when not measured; bare the baseline.
	side func(ConcurrencyPoint) *PhaseFigures
	bare func(ConcurrencyPoint) PhaseFigures
}

// targets are the path's: every run completes, run p50 and p99 over its
// baseline's, send p99 over the bare update-with-start's.
func (c clientPath) targets() []ConcurrencyTarget {
	runs := func(p ConcurrencyPoint) (side, bare Latencies, ok bool) {
		f := c.side(p)
		if f == nil {
			return nil, nil, false
		}
		b := c.bare(p)
		return f.Runs, b.Runs, len(f.Runs) > 0 && len(b.Runs) > 0
	}
	runRatio := func(q float64, at int, most float64) ConcurrencyTarget {
		pick := func(l Latencies) time.Duration { return l.Percentile(q) }
		return ConcurrencyTarget{fmt.Sprintf("%srun p%g ≤ %g× %s", c.prefix, q, most, c.bareName), at,
			func(p ConcurrencyPoint) (bool, bool) {
				side, bare, ok := runs(p)
				r := ratio(pick(side), pick(bare))
				return r > 0 && r <= most, ok
			},
			func(p ConcurrencyPoint) string {
				side, bare, _ := runs(p)
				return fmt.Sprintf("%.2f× (%s vs %s)", ratio(pick(side), pick(bare)), secs(pick(side)), secs(pick(bare)))
			}}
	}
	return []ConcurrencyTarget{
		{c.prefix + "every run completes", TargetAllCompleteAt,
			func(p ConcurrencyPoint) (bool, bool) {
				f := c.side(p)
				if f == nil {
					return false, false
				}
				return f.Failed == 0 && f.Completed+f.Cancelled+f.CancelMissed == p.Sessions, true
			},
			func(p ConcurrencyPoint) string {
				f := c.side(p)
				return fmt.Sprintf("%d completed, %d cancelled, %d failed", f.Completed+f.CancelMissed, f.Cancelled, f.Failed)
			}},
		runRatio(50, TargetRatioAt, TargetRunP50Ratio),
		runRatio(50, TargetLargeAt, TargetRunP50RatioLarge),
		runRatio(99, TargetRatioAt, TargetRunP99Ratio),
		runRatio(99, TargetLargeAt, TargetRunP99Ratio),
		{fmt.Sprintf("%ssend p99 ≤ %g× bare update-with-start p99", c.prefix, TargetSendP99Ratio), targetEverySessionCnt,
			func(p ConcurrencyPoint) (bool, bool) {
				f := c.side(p)
				if f == nil {
					return false, false
				}
				r := ratio(f.Starts.P99(), p.BaselineUWS.Starts.P99())
				return r > 0 && r <= TargetSendP99Ratio, len(f.Starts) > 0 && len(p.BaselineUWS.Starts) > 0
			},
			func(p ConcurrencyPoint) string {
				f, u := c.side(p).Starts.P99(), p.BaselineUWS.Starts.P99()
				return fmt.Sprintf("%.2f× (%s vs %s)", ratio(f, u), secs(f), secs(u))
			}},
	}
}

// The client paths the targets judge: keel's Go client against the bare
// start, and a foreign client against the bare update-with-start.
var (
	keelClientPath = clientPath{bareName: "bare",
		side: func(p ConcurrencyPoint) *PhaseFigures { return &p.Keel },
		bare: func(p ConcurrencyPoint) PhaseFigures { return p.Baseline }}
	foreignClientPath = clientPath{prefix: "foreign client: ", bareName: "bare update-with-start",
		side: func(p ConcurrencyPoint) *PhaseFigures { return p.Foreign },
		bare: func(p ConcurrencyPoint) PhaseFigures { return p.BaselineUWS }}
)

// ConcurrencyTargets returns the targets in the order a report lists them:
// keel's Go client's, then the foreign client's.
func ConcurrencyTargets() []ConcurrencyTarget {
	keelOnly := []ConcurrencyTarget{
		{"send p99 ≤ 1 s", TargetRatioAt,
			func(p ConcurrencyPoint) (bool, bool) {
				return p.Keel.Starts.P99() <= TargetSendP99, len(p.Keel.Starts) > 0
			},
			func(p ConcurrencyPoint) string { return secs(p.Keel.Starts.P99()) }},
		{"≤ 1 heartbeat/s per streaming turn", targetEverySessionCnt,
			func(p ConcurrencyPoint) (bool, bool) {
				return p.Keel.HeartbeatsPerSecond() <= TargetHeartbeatsPerS, p.Keel.StreamTime > 0
			},
			func(p ConcurrencyPoint) string { return fmt.Sprintf("%.2f/s", p.Keel.HeartbeatsPerSecond()) }},
		{fmt.Sprintf("billable actions ≤ bare + %d a run", TargetExtraActions), targetEverySessionCnt,
			func(p ConcurrencyPoint) (bool, bool) {
				return p.Keel.ActionsPerRun() <= p.Baseline.ActionsPerRun()+TargetExtraActions,
					p.Keel.Sessions() > 0 && p.Baseline.ActionsPerRun() > 0
			},
			func(p ConcurrencyPoint) string {
				r, _ := p.ActionRatios()
				return fmt.Sprintf("%s vs %s (%.2f×)", trim(p.Keel.ActionsPerRun()), trim(p.Baseline.ActionsPerRun()), r)
			}},
		{"cancel of a streaming turn p99 ≤ 500 ms", targetEverySessionCnt,
			func(p ConcurrencyPoint) (bool, bool) {
				return p.Keel.Cancels.P99() <= TargetCancelP99 && p.Keel.CancelMissed == 0, len(p.Keel.Cancels)+p.Keel.CancelMissed > 0
			},
			func(p ConcurrencyPoint) string {
				s := fmt.Sprintf("%s (%d)", millis(p.Keel.Cancels.P99()), len(p.Keel.Cancels))
				if p.Keel.CancelMissed > 0 {
					s += fmt.Sprintf(", %d completed before the cancel", p.Keel.CancelMissed)
				}
				return s
			}},
	}
	return slices.Concat(keelClientPath.targets(), keelOnly, foreignClientPath.targets())
}

// Verdict judges t on the report: Pass, Fail, or NotMeasured when no
// measurement can be judged; detail lists what was judged, per N.
func (r *ConcurrencyReport) Verdict(t ConcurrencyTarget) (verdict, detail string) {
	verdict = Pass
	var parts []string
	judged := false
	for _, p := range r.Points {
		if t.Sessions != 0 && p.Sessions != t.Sessions {
			continue
		}
		met, applies := t.Met(p)
		if !applies {
			continue
		}
		judged = true
		if !met {
			verdict = Fail
		}
		parts = append(parts, fmt.Sprintf("%d: %s", p.Sessions, t.Measure(p)))
	}
	if !judged {
		return NotMeasured, ""
	}
	return verdict, strings.Join(parts, "; ")
}

// Verdicts of the concurrency targets, besides Pass.
const (
	Fail        = "FAIL"
	NotMeasured = "not measured"
)

// Machine describes where the figures were taken.
func (r *ConcurrencyReport) Machine() string {
	s := fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	if r.Load != "" {
		s += ", load average " + r.Load + " at start"
	}
	return s
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func millis(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1f ms", Millis(d))
	}
	return fmt.Sprintf("%.0f ms", Millis(d))
}
