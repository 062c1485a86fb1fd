package worker

import (
	"context"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/internal/sessionlog"
	"github.com/keelrun/keel/transcript"
)

// What an eval reads of a session's log: its runs, through the one
// reducer of events (package transcript), and the time of each run's
// first and last durable event.

// Bounds of what an eval reads of one session's log.
const (
	maxEvalLogEvents = 500_000
	// maxEvalToolArgs bounds the arguments a report keeps of a call;
	// scorers see them whole.
	maxEvalToolArgs = 2 << 10
)

// observeRun reads what run n of the session did.
func observeRun(ctx context.Context, s *client.Session, n int) (api.EvalRun, error) {
	t, spans, err := sessionlog.Read(ctx, s, maxEvalLogEvents)
	if err != nil {
		return api.EvalRun{}, err
	}
	for _, r := range t.Runs() {
		if r.Number == n && r.Status.Ended() {
			return evalRunOf(s.ID(), r, spans[r.ID]), nil
		}
	}
	return api.EvalRun{}, keel.Errorf(keel.CodeNotFound, "session %s has no committed run %d in its log", s.ID(), n)
}

// followRun follows run r's events until its terminal event and reads
// what it did. It reads the run's own execution as it commits: a read of
// the log after the run (observeRun) waits for the session's next
// execution's first task, about a second after a continue-as-new.
func followRun(ctx context.Context, r *client.Run) (api.EvalRun, error) {
	t := transcript.New()
	var sp sessionlog.Span
	for env, err := range r.Events(ctx) {
		if err != nil {
			return api.EvalRun{}, err
		}
		t.Apply(env)
		if env.RunID == r.ID {
			sp.Add(env.At)
		}
		for _, run := range t.Runs() {
			if run.ID == r.ID && run.Status.Ended() {
				return evalRunOf(r.Session().ID(), run, sp), nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return api.EvalRun{}, err
	}
	return observeRun(ctx, r.Session(), r.Number)
}

// evalRunOf is the eval's record of a run.
func evalRunOf(session string, r *transcript.Run, sp sessionlog.Span) api.EvalRun {
	run := api.EvalRun{Session: session, RunID: r.ID, Model: r.Model, Status: keel.RunStatus(r.Status),
		Duration: keel.Duration(sp.Last.Sub(sp.First))}
	u := r.Usage
	run.Usage = keel.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens, WebSearches: u.WebSearches,
		Requests: u.Requests, Cost: u.Cost, Unpriced: u.Unpriced}
	switch {
	case r.Result != nil && r.Result.Text != "":
		run.Answer = r.Result.Text
	case len(r.Steps) > 0:
		run.Answer = r.Steps[len(r.Steps)-1].Text
	}
	if r.Result != nil && r.Result.Code != "" {
		run.Error = &keel.Error{Code: r.Result.Code, Message: r.Result.Message, Retryable: r.Result.Retryable}
	}
	for _, tc := range r.Tools {
		run.Tools = append(run.Tools, api.EvalToolCall{Name: tc.Name, Arguments: tc.Arguments, Status: string(tc.State)})
	}
	return run
}

// clipBytes cuts s to at most n bytes at a rune boundary.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
