package bench

// ConcurrencySummary is a ConcurrencyReport as numbers a program can
// compare: seconds, and counts per run.
type ConcurrencySummary struct {
	Label          string          `json:"label,omitempty"`
	Machine        string          `json:"machine"`
	ModelSeconds   float64         `json:"model_seconds"`
	CancelFraction float64         `json:"cancel_fraction"`
	WorkerProcess  bool            `json:"worker_process"`
	RemoteCodec    bool            `json:"remote_codec,omitempty"`
	Points         []PointSummary  `json:"points"`
	Targets        []TargetVerdict `json:"targets"`
}

// PointSummary is one number of sessions.
type PointSummary struct {
	Sessions int        `json:"sessions"`
	RunRatio [2]float64 `json:"run_p50_p99_over_bare"`
	// Keel's billable actions per run over the bare baseline's and the
	// shaped one's.
	ActionsOverBare   float64     `json:"billable_actions_over_bare"`
	ActionsOverShaped float64     `json:"billable_actions_over_shaped,omitempty"`
	Keel              SideSummary `json:"keel"`
	Baseline          SideSummary `json:"baseline"`
	// Shaped is the shaped baseline, when measured.
	Shaped *SideSummary `json:"shaped,omitempty"`
	// BaselineUWS is the update-with-start baseline; keel's send p99 over
	// its update-with-start p99.
	BaselineUWS     SideSummary `json:"baseline_update_with_start"`
	SendOverBareUWS float64     `json:"send_p99_over_bare_update_with_start"`
	// Foreign is keel driven by a foreign client, when measured, with its
	// run p50 and p99 and its send p99 over the update-with-start
	// baseline's.
	Foreign                *SideSummary `json:"foreign,omitempty"`
	ForeignRunRatio        [2]float64   `json:"foreign_run_p50_p99_over_bare_update_with_start,omitzero"`
	ForeignSendOverBareUWS float64      `json:"foreign_send_p99_over_bare_update_with_start,omitzero"`
}

// SideSummary is one side of a measurement; per-run figures divide by
// the sessions (history figures by the completed runs).
type SideSummary struct {
	Completed           int                `json:"completed"`
	Cancelled           int                `json:"cancelled"`
	CancelMissed        int                `json:"completed_before_cancel"`
	Failed              int                `json:"failed"`
	RunSeconds          [2]float64         `json:"run_p50_p99_s"`
	StartSeconds        [2]float64         `json:"send_or_start_p50_p99_s"`
	CancelSeconds       [2]float64         `json:"cancel_p50_p99_s"`
	RPCsPerRun          map[string]float64 `json:"rpcs_per_run"`
	HeartbeatsPerTurn   float64            `json:"heartbeats_per_turn"`
	HeartbeatsPerSecond float64            `json:"heartbeats_per_second"`
	HistoryEventsPerRun float64            `json:"history_events_per_run"`
	EventsPerRun        map[string]float64 `json:"history_events_by_type_per_run"`
	TasksPerStep        float64            `json:"workflow_tasks_per_step"`
	PersistencePerRun   map[string]float64 `json:"persistence_per_run"`
	PersistenceWrites   float64            `json:"persistence_writes_per_run"`
	ActionsPerRun       float64            `json:"billable_actions_per_run"`
	ActionsByType       map[string]float64 `json:"billable_actions_by_type_per_run"`
	ServerCPUPerRun     float64            `json:"server_cpu_s_per_run"`
	WorkerCPUPerRun     float64            `json:"worker_cpu_s_per_run"`
	Warnings            Counts             `json:"server_warnings"`
}

// TargetVerdict is a target's verdict on the report.
type TargetVerdict struct {
	Target   string `json:"target"`
	Sessions int    `json:"sessions,omitempty"`
	Verdict  string `json:"verdict"`
	Detail   string `json:"detail,omitempty"`
}

// Summary returns the report as numbers.
func (r *ConcurrencyReport) Summary() ConcurrencySummary {
	out := ConcurrencySummary{Label: r.Revision, Machine: r.Machine(), ModelSeconds: r.ModelTime.Seconds(),
		CancelFraction: r.CancelFraction, WorkerProcess: r.WorkerProcess, RemoteCodec: r.RemoteCodec}
	for _, p := range r.Points {
		r50, r99 := p.RunRatios()
		overBare, overShaped := p.ActionRatios()
		ps := PointSummary{Sessions: p.Sessions, RunRatio: [2]float64{r50, r99}, ActionsOverBare: overBare, ActionsOverShaped: overShaped,
			Keel: summarize(p.Keel), Baseline: summarize(p.Baseline)}
		ps.Shaped, ps.Foreign = summarizeIf(p.Shaped), summarizeIf(p.Foreign)
		ps.BaselineUWS, ps.SendOverBareUWS = summarize(p.BaselineUWS), p.SendRatio()
		f50, f99, fSend := p.ForeignRatios()
		ps.ForeignRunRatio, ps.ForeignSendOverBareUWS = [2]float64{f50, f99}, fSend
		out.Points = append(out.Points, ps)
	}
	for _, t := range ConcurrencyTargets() {
		v, d := r.Verdict(t)
		out.Targets = append(out.Targets, TargetVerdict{Target: t.Text, Sessions: t.Sessions, Verdict: v, Detail: d})
	}
	return out
}

// summarizeIf summarizes a measurement that may not have been taken.
func summarizeIf(f *PhaseFigures) *SideSummary {
	if f == nil {
		return nil
	}
	s := summarize(*f)
	return &s
}

func summarize(f PhaseFigures) SideSummary {
	s2 := func(l Latencies) [2]float64 { return [2]float64{l.P50().Seconds(), l.P99().Seconds()} }
	perRun := func(c Counts, n int) map[string]float64 {
		m := map[string]float64{}
		for k, v := range c {
			m[k] = per(v, n)
		}
		return m
	}
	_, writes := f.PersistencePerRun()
	server, worker := f.CPUPerRun()
	return SideSummary{
		Completed: f.Completed, Cancelled: f.Cancelled, CancelMissed: f.CancelMissed, Failed: f.Failed,
		RunSeconds: s2(f.Runs), StartSeconds: s2(f.Starts), CancelSeconds: s2(f.Cancels),
		RPCsPerRun:        perRun(f.Server.RPCs, f.Sessions()),
		HeartbeatsPerTurn: f.HeartbeatsPerTurn(), HeartbeatsPerSecond: f.HeartbeatsPerSecond(),
		HistoryEventsPerRun: f.History.EventsPerRun(), EventsPerRun: perRun(f.History.Events, f.History.Runs),
		TasksPerStep:      f.History.WorkflowTasksPerStep(),
		PersistencePerRun: perRun(f.Server.Persistence, f.Sessions()), PersistenceWrites: writes,
		ActionsPerRun: f.ActionsPerRun(), ActionsByType: perRun(f.Server.Actions, f.Sessions()),
		ServerCPUPerRun: server, WorkerCPUPerRun: worker, Warnings: f.Server.Warnings,
	}
}
