package bench

import (
	"fmt"
	"runtime"
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
	// Revision is the VCS revision of the binary, "" if unknown; Load the
	// one-minute load average at the start, "" if unknown.
	Revision, Load string
	// Points holds one measurement per number of sessions.
	Points []ConcurrencyPoint
}

// ConcurrencyPoint is one number of concurrent sessions, measured on keel
// and on the bare baseline on the same server.
type ConcurrencyPoint struct {
	Sessions       int
	Keel, Baseline PhaseFigures
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
	TargetAllCompleteAt   = 1000
	TargetRatioAt         = 500
	TargetRunP50Ratio     = 1.25
	TargetRunP99Ratio     = 1.5
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

// ConcurrencyTargets returns the targets in the order a report lists them.
func ConcurrencyTargets() []ConcurrencyTarget {
	return []ConcurrencyTarget{
		{"every run completes", TargetAllCompleteAt,
			func(p ConcurrencyPoint) (bool, bool) {
				k := p.Keel
				return k.Failed == 0 && k.Completed+k.Cancelled+k.CancelMissed == p.Sessions, true
			},
			func(p ConcurrencyPoint) string {
				return fmt.Sprintf("%d completed, %d cancelled, %d failed", p.Keel.Completed+p.Keel.CancelMissed, p.Keel.Cancelled, p.Keel.Failed)
			}},
		{fmt.Sprintf("run p50 ≤ %.2f× bare", TargetRunP50Ratio), TargetRatioAt,
			func(p ConcurrencyPoint) (bool, bool) {
				r, _ := p.RunRatios()
				return r > 0 && r <= TargetRunP50Ratio, len(p.Keel.Runs) > 0 && len(p.Baseline.Runs) > 0
			},
			func(p ConcurrencyPoint) string {
				r, _ := p.RunRatios()
				return fmt.Sprintf("%.2f× (%s vs %s)", r, secs(p.Keel.Runs.P50()), secs(p.Baseline.Runs.P50()))
			}},
		{fmt.Sprintf("run p99 ≤ %.1f× bare", TargetRunP99Ratio), TargetRatioAt,
			func(p ConcurrencyPoint) (bool, bool) {
				_, r := p.RunRatios()
				return r > 0 && r <= TargetRunP99Ratio, len(p.Keel.Runs) > 0 && len(p.Baseline.Runs) > 0
			},
			func(p ConcurrencyPoint) string {
				_, r := p.RunRatios()
				return fmt.Sprintf("%.2f× (%s vs %s)", r, secs(p.Keel.Runs.P99()), secs(p.Baseline.Runs.P99()))
			}},
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
