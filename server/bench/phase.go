package bench

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"time"
)

// An outcome is how one session of a measurement ended.
type outcome int

const (
	outcomeCompleted    outcome = iota
	outcomeCancelled            // cancelled as planned
	outcomeCancelMissed         // to be cancelled, but completed first
	outcomeFailed
)

// sessionResult is what one session of a measurement saw.
type sessionResult struct {
	outcome outcome
	err     error
	// start is the send (keel) or start (baseline) call; run is from its
	// beginning to the outcome, for a completed run; cancel is from the
	// cancel call to the cancelled outcome.
	start, run, cancel time.Duration
	// workflows are the run's workflow executions, for its histories.
	workflows []execution
}

// execution names a workflow execution whose history a run's figures
// read: its workflow ID and run ID ("" for the latest).
type execution struct{ id, runID string }

// phase is one side of a measurement: keel, or the bare baseline.
type phase struct {
	name string
	// session runs session i, cancelling it mid-stream if cancel is set.
	session func(ctx context.Context, i int, cancel bool) sessionResult
	// workerPID is the worker process's, 0 when it runs in this process.
	workerPID int
	// streamActivity is the activity type that streams.
	streamActivity string
	// settle, when set, waits after the sessions for what their runs
	// still cause on the server (a session's next execution), and
	// may rename their executions; the billable actions are counted until
	// it returns.
	settle func(ctx context.Context, results []sessionResult) error
}

// run starts all n sessions at once, waits for every outcome, and
// gathers the figures, with the server's counts and the CPU time of this
// process and the worker's over the same span.
func (s *stack) run(ctx context.Context, ph phase) (PhaseFigures, []sessionResult, error) {
	f := PhaseFigures{StreamActivity: ph.streamActivity}
	c := cancels(s.n, s.opts.CancelFraction)
	s.say("%s: %d sessions at once (%d cancelled mid-stream)", ph.name, s.n, c)
	before, clientsBefore := s.counters.Snapshot(), s.clientRPCs.Snapshot()
	s.counters.TakeTimes()
	cpu0, err := ProcessCPU(0)
	if err != nil {
		cpu0 = -1
	}
	wcpu0 := time.Duration(-1)
	if ph.workerPID != 0 {
		if d, err := ProcessCPU(ph.workerPID); err == nil {
			wcpu0 = d
		}
	}

	results := make([]sessionResult, s.n)
	var wg sync.WaitGroup
	begin := make(chan struct{})
	t0 := time.Now()
	for i := range s.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			results[i] = ph.session(ctx, i, cancelled(i, s.n, c))
		}()
	}
	stopProfile, err := s.startProfile(ph.name)
	if err != nil {
		return f, nil, err
	}
	close(begin)
	wg.Wait()
	f.Wall = time.Since(t0)
	if err := stopProfile(); err != nil {
		return f, nil, err
	}

	f.Server, f.ClientRPCs = s.counters.Snapshot().Sub(before), s.clientRPCs.Snapshot().Sub(clientsBefore)
	f.ServerTimes = s.counters.TakeTimes()
	if ph.settle != nil {
		if err := ph.settle(ctx, results); err != nil {
			return f, results, err
		}
		// Settling reads histories, which bill nothing.
		f.Server.Actions = s.counters.Snapshot().Actions.Sub(before.Actions)
	}
	if cpu1, err := ProcessCPU(0); err == nil && cpu0 >= 0 {
		f.ServerCPU, f.ServerCPUKnown = cpu1-cpu0, true
	}
	if wcpu0 >= 0 {
		if d, err := ProcessCPU(ph.workerPID); err == nil {
			f.WorkerCPU, f.WorkerCPUKnown = d-wcpu0, true
		}
	}
	for _, r := range results {
		f.Starts = append(f.Starts, r.start)
		switch r.outcome {
		case outcomeCompleted:
			f.Completed++
			f.Runs = append(f.Runs, r.run)
		case outcomeCancelled:
			f.Cancelled++
			f.Cancels = append(f.Cancels, r.cancel)
		case outcomeCancelMissed:
			f.CancelMissed++
		case outcomeFailed:
			f.Failed++
			if len(f.Errors) < 5 {
				f.Errors = append(f.Errors, r.err.Error())
			}
		}
	}
	if ctx.Err() != nil {
		return f, results, ctx.Err()
	}
	return f, results, nil
}

// phaseHistories reads the histories of every run that got started: the
// completed runs' for their figures, all of them for the time the
// streaming activities ran.
func (s *stack) phaseHistories(ctx context.Context, f *PhaseFigures, results []sessionResult, kinds []string, steps int) error {
	var runs []historyRun
	for _, r := range results {
		if len(r.workflows) > 0 {
			runs = append(runs, historyRun{executions: r.workflows, completed: r.outcome == outcomeCompleted})
		}
	}
	s.say("reading the histories of %d runs", len(runs))
	var err error
	f.History, err = s.histories(ctx, runs, kinds, steps, f.StreamActivity)
	f.StreamTurns, f.StreamTime = f.History.StreamActivities, f.History.StreamTime
	return err
}

func failed(err error, what string) sessionResult {
	return sessionResult{outcome: outcomeFailed, err: fmt.Errorf("%s: %w", what, err)}
}

// startProfile starts the CPU profile of phase when the options ask for
// one; the returned function stops it and closes its file.
func (s *stack) startProfile(phase string) (stop func() error, err error) {
	if s.opts.CPUProfile == "" {
		return func() error { return nil }, nil
	}
	path := fmt.Sprintf("%s-%d-%s.pprof", s.opts.CPUProfile, s.n, phase)
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: CPU profile: %w", err)
	}
	s.say("%s: CPU profile to %s", phase, path)
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
