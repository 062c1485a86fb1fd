package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/eval"
	"github.com/keelrun/keel/server/internal/sessionlog"
)

// evals are the activities of an eval (docs/contract.md §24): each side
// of a case is a session of its own, sent through keel's own send path
// (the validation, rate limits and budgets of every send), forked first
// from the recorded session for a recorded run. A case's session IDs
// derive from the eval and the case (api.EvalCaseSessionID), and each
// send is a SendOnce, so a retried attempt (a worker killed mid-case)
// follows the run its first attempt started instead of starting another.
type evals struct {
	keel    *client.Client
	scorers []eval.Scorer
	// ceiling is the worker's budget ceiling for a run, if any.
	ceiling *api.Budget
}

// evalHeartbeat is how often a case's activity heartbeats while its run
// runs (its heartbeat timeout is a minute).
const evalHeartbeat = 10 * time.Second

// evalSendID is the SendOnce ID of a case's prompt, in the case's own
// session.
const evalSendID = "eval"

// RecordedCases reads each session's committed runs as cases, in
// session then run order: the run's prompt, from the point before it.
func (e *evals) RecordedCases(ctx context.Context, req eval.RecordedCasesRequest) ([]api.EvalCase, error) {
	sessions := req.Sessions
	if req.Prefix != "" {
		listed, err := e.sessionsUnder(ctx, req.Prefix, req.Exclude)
		if err != nil {
			return nil, activityError(err)
		}
		for _, id := range listed {
			if !slices.Contains(sessions, id) {
				sessions = append(sessions, id)
			}
		}
		if len(sessions) > api.MaxEvalSessions {
			return nil, activityError(keel.Errorf(keel.CodeTooLarge, "more than %d sessions to replay", api.MaxEvalSessions))
		}
	}
	var cases []api.EvalCase
	for _, id := range sessions {
		if err := keel.ValidateSessionID(id); err != nil {
			return nil, activityError(err)
		}
		t, _, err := sessionlog.Read(ctx, e.keel.Session(id), maxEvalLogEvents)
		if err != nil {
			return nil, activityError(err)
		}
		for _, r := range t.Runs() {
			if r.Number < 1 || r.Prompt == "" || !r.Status.Ended() {
				continue
			}
			if len(cases) == req.Max {
				return nil, activityError(keel.Errorf(keel.CodeTooLarge, "the recorded sessions have more than %d runs", req.Max))
			}
			cases = append(cases, api.EvalCase{ID: r.ID, Prompt: r.Prompt, From: &api.EvalSource{Session: id, Run: r.Number}})
		}
		activity.RecordHeartbeat(ctx)
	}
	if len(cases) == 0 {
		return nil, activityError(keel.Errorf(keel.CodeNotFound, "the recorded sessions have no committed run"))
	}
	return cases, nil
}

// sessionsUnder lists, sorted, the sessions whose IDs start with prefix
// but not with exclude, and are not child sessions, as Temporal's
// visibility has them; at most one more than api.MaxEvalSessions.
func (e *evals) sessionsUnder(ctx context.Context, prefix, exclude string) ([]string, error) {
	if err := keel.ValidateSessionID(prefix); err != nil {
		return nil, err
	}
	// prefix is letters, digits, '-' and '_': nothing to escape.
	query := fmt.Sprintf("WorkflowType = '%s' AND WorkflowId STARTS_WITH '%s'", api.SessionWorkflowName, prefix)
	seen := map[string]bool{}
	var token []byte
	for {
		resp, err := e.keel.Temporal().ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: e.keel.Namespace(), Query: query, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list the sessions under %s: %w", prefix, err)
		}
		for _, ex := range resp.GetExecutions() {
			id := ex.GetExecution().GetWorkflowId()
			if (exclude == "" || !strings.HasPrefix(id, exclude)) && !api.IsChildSessionID(id) {
				seen[id] = true
			}
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 || len(seen) > api.MaxEvalSessions {
			return slices.Sorted(maps.Keys(seen)), nil
		}
	}
}

// RunCase runs one side of a case and scores it. A case that cannot run
// (its send refused, its recorded run gone) is the side's Error, not the
// activity's: retrying would not change it.
func (e *evals) RunCase(ctx context.Context, req eval.CaseRequest) (api.EvalSide, error) {
	stop := heartbeat(ctx, evalHeartbeat)
	defer stop()
	var run api.EvalRun
	var err error
	if req.Config == nil {
		if req.Case.From == nil {
			return api.EvalSide{}, activityError(keel.Errorf(keel.CodeInvalidInput, "a case without a recorded run needs a configuration"))
		}
		run, err = observeRun(ctx, e.keel.Session(req.Case.From.Session), req.Case.From.Run)
	} else {
		run, err = e.run(ctx, req)
	}
	var ke *keel.Error
	if errors.As(err, &ke) && ctx.Err() == nil && !ke.Retryable {
		return api.EvalSide{Error: ke}, nil
	}
	if err != nil {
		return api.EvalSide{}, err
	}
	scorers := append(eval.Builtin(req.Case.Expect), e.scorers...)
	if rubric := eval.RubricOf(req.Judge, req.Case); req.Judge != nil && rubric != "" {
		scorers = append(scorers, &judge{e: e, req: req, rubric: rubric})
	}
	side := eval.ScoreRun(ctx, scorers, req.Case, run)
	if err := ctx.Err(); err != nil {
		// A scorer cut short is no verdict: the next attempt scores again.
		return api.EvalSide{}, err
	}
	if len(side.Run.Answer) > api.MaxEvalAnswerBytes {
		side.Run.Answer, side.Run.AnswerCut = clipBytes(side.Run.Answer, api.MaxEvalAnswerBytes), true
	}
	for i := range side.Run.Tools {
		if len(side.Run.Tools[i].Arguments) > maxEvalToolArgs {
			side.Run.Tools[i].Arguments = nil
		}
	}
	return side, nil
}

// run sends the case's prompt in its own session (a fork of the
// recorded session for a recorded run, with the attachments the run was
// sent with; a session that starts with the case's conversation for a
// dataset case that has one) and waits for the run's end. A cancelled
// activity cancels the run.
func (e *evals) run(ctx context.Context, req eval.CaseRequest) (api.EvalRun, error) {
	id := api.EvalCaseSessionID(req.EvalID, req.Index, req.Side)
	cfg := *req.Config
	cfg.Budget = eval.RunBudget(cfg.Budget, req.Left, e.ceiling)
	sess := e.keel.Session(id)
	if msgs := req.Case.Messages(); len(msgs) > 0 {
		// The case's conversation: its session starts with it, on
		// either side.
		sess = sess.StartingWith(msgs)
	}
	if from := req.Case.From; from != nil {
		src := e.keel.Session(from.Session)
		if cfg.Model == "" && cfg.Agent == "" {
			// As keel rerun: the original run's model unless told.
			orig, err := observeRun(ctx, src, from.Run)
			if err != nil {
				return api.EvalRun{}, err
			}
			cfg.Model = orig.Model
		}
		if _, _, err := src.Fork(ctx, api.Point{Run: from.Run - 1}, id); err != nil {
			return api.EvalRun{}, err
		}
		if len(req.Case.Attachments) == 0 {
			atts, err := promptAttachments(ctx, src, from.Run, req.Case.Prompt)
			if err != nil {
				return api.EvalRun{}, err
			}
			req.Case.Attachments = atts
		}
	}
	opts := []client.SendOption{client.WithConfig(cfg)}
	if len(req.Case.Attachments) > 0 {
		opts = append(opts, client.WithAttachments(req.Case.Attachments...))
	}
	r, err := sess.SendOnce(ctx, evalSendID, req.Case.Prompt, opts...)
	if err != nil {
		return api.EvalRun{}, err
	}
	if msgs := req.Case.Messages(); len(msgs) > 0 {
		if err := startedWith(ctx, sess, r, msgs); err != nil {
			return api.EvalRun{}, err
		}
	}
	// An attempt that ends (a lost heartbeat, a cancelled eval) leaves
	// the run alone: the next attempt follows it, and a cancelled eval
	// cancels it itself (CancelCase).
	return followRun(ctx, r)
}

// startedWith checks that run r is the first of a session that began
// with the case's conversation. A session of the case's ID that existed
// before the eval, or that a worker older than conversations started,
// has another history: its run would be scored on it. That run is
// cancelled, and the side is an error (keel.CodeInvalidInput); a
// retried attempt finds the run its first attempt started, first in
// the session, and goes on.
func startedWith(ctx context.Context, sess *client.Session, r *client.Run, msgs []keel.Message) error {
	page, err := sess.History(ctx, 0, len(msgs))
	if err != nil {
		return err
	}
	same := r.Number == 1 && len(page.Messages) == len(msgs)
	for i := 0; same && i < len(msgs); i++ {
		same = page.Messages[i].Role == msgs[i].Role && page.Messages[i].Content == msgs[i].Content
	}
	if same {
		return nil
	}
	// Best effort: a run that ended, or is queued, has nothing to
	// cancel, and the side's error stands either way.
	_ = r.Cancel(ctx)
	if err := ctx.Err(); err != nil {
		return err
	}
	return keel.Errorf(keel.CodeInvalidInput, "session %s did not start with the case's conversation: "+
		"it existed before the eval, or a worker older than conversations started it", sess.ID())
}

// CancelCase cancels the active runs of a case's sessions, each side's
// and its judge's; a session without one is left as it is.
func (e *evals) CancelCase(ctx context.Context, req eval.CancelCaseRequest) error {
	for _, side := range []string{eval.SideCandidate, eval.SideBaseline, eval.SideCandidate + "j", eval.SideBaseline + "j"} {
		err := e.keel.Session(api.EvalCaseSessionID(req.EvalID, req.Index, side)).Cancel(ctx)
		if err != nil && !errors.Is(err, keel.ErrNotFound) {
			return err
		}
	}
	return nil
}

// judge asks the eval's judge model to grade a run: a session of its
// own per case and side, whose answer must match eval.JudgeSchema.
type judge struct {
	e      *evals
	req    eval.CaseRequest
	rubric string
}

func (j *judge) Name() string { return "judge" }

func (j *judge) Score(ctx context.Context, c api.EvalCase, run api.EvalRun) (api.EvalScore, error) {
	sess := j.e.keel.Session(api.EvalCaseSessionID(j.req.EvalID, j.req.Index, j.req.Side+"j"))
	cfg := api.RunConfig{Model: j.req.Judge.Model, System: eval.JudgeSystem, OutputSchema: eval.JudgeSchema,
		Tools: []string{}, MaxSteps: 1}
	r, err := sess.SendOnce(ctx, evalSendID, eval.JudgePrompt(j.rubric, c, run), client.WithConfig(cfg))
	if err != nil {
		return api.EvalScore{}, fmt.Errorf("judge: %w", err)
	}
	jr, err := followRun(ctx, r)
	if err != nil {
		return api.EvalScore{}, fmt.Errorf("judge: %w", err)
	}
	usage := jr.Usage
	if jr.Status != keel.StatusCompleted {
		why := string(jr.Status)
		if jr.Error != nil {
			why = jr.Error.Error()
		}
		return api.EvalScore{Usage: &usage}, fmt.Errorf("judge gave no verdict: %s", why)
	}
	v, err := eval.ParseVerdict(jr.Answer)
	if err != nil {
		return api.EvalScore{Usage: &usage}, fmt.Errorf("judge gave no verdict: %w", err)
	}
	return api.EvalScore{Scorer: "judge", Pass: v.Pass, Score: v.Score, Reason: v.Reasons, Usage: &usage}, nil
}

// heartbeat records the activity's heartbeat every d until stop.
func heartbeat(ctx context.Context, d time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			activity.RecordHeartbeat(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return cancel
}

// registerEvals registers the activities of evals on r.
func registerEvals(r Registrar, e *evals) {
	r.RegisterActivityWithOptions(e.RecordedCases, activity.RegisterOptions{Name: eval.RecordedCasesActivity})
	r.RegisterActivityWithOptions(e.RunCase, activity.RegisterOptions{Name: eval.RunCaseActivity})
	r.RegisterActivityWithOptions(e.CancelCase, activity.RegisterOptions{Name: eval.CancelCaseActivity})
}

// promptAttachments are the attachments run n of the session was sent
// with, so that its case sends its prompt as the original run got it:
// its prompt's message in the transcript after the run (the last user
// message that neither steering nor a hook brought). None when a
// compaction in the run replaced that message.
func promptAttachments(ctx context.Context, s *client.Session, n int, prompt string) ([]keel.Attachment, error) {
	fp, err := s.ForkPoint(ctx, api.Point{Run: n})
	if err != nil {
		return nil, err
	}
	for i := len(fp.Transcript) - 1; i >= 0; i-- {
		m := fp.Transcript[i]
		if m.Role == keel.RoleUser && m.SteeringID == "" && m.InputID == "" {
			if m.Content != prompt {
				return nil, nil
			}
			return m.Attachments, nil
		}
	}
	return nil, nil
}
