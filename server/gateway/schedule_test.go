package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/gateway"
)

// Schedules over HTTP (docs/contract.md §22, docs/gateway.md "Schedules").

// scheduleStatus decodes a schedule's description.
func scheduleStatus(t *testing.T, r reply) gateway.ScheduleStatus {
	t.Helper()
	var st gateway.ScheduleStatus
	if err := json.Unmarshal(r.raw, &st); err != nil {
		t.Fatalf("description: %v\n%s", err, r.raw)
	}
	return st
}

// waitSchedule reads GET /v1/schedules/{id} until ok, polling: a
// schedule's firings have no event to wait on.
func (s *stack) waitSchedule(t *testing.T, id, what string, ok func(gateway.ScheduleStatus) bool) gateway.ScheduleStatus {
	t.Helper()
	ctx := testCtx(t)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		r := s.call(t, http.MethodGet, "/v1/schedules/"+id, nil)
		if r.status == http.StatusOK {
			if st := scheduleStatus(t, r); ok(st) {
				return st
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("schedule %s: waiting for %s: last answer %d %s", id, what, r.status, r.raw)
		case <-tick.C:
		}
	}
}

// listed lists the schedules as s's key sees them, once visibility has
// want among them (or, with want empty, at once).
func (s *stack) listed(t *testing.T, want ...string) []string {
	t.Helper()
	ctx := testCtx(t)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var out gateway.SchedulesResponse
		r := s.call(t, http.MethodGet, "/v1/schedules?limit=200", nil).must(t, http.StatusOK)
		if err := json.Unmarshal(r.raw, &out); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, sum := range out.Schedules {
			ids = append(ids, sum.ID)
		}
		all := true
		for _, w := range want {
			all = all && strings.Contains(","+strings.Join(ids, ",")+",", ","+w+",")
		}
		if all {
			return ids
		}
		select {
		case <-ctx.Done():
			t.Fatalf("schedules %v never listed; last list %v", want, ids)
		case <-tick.C:
		}
	}
}

// TestScheduleRoutes: create, describe, list, change, trigger (the firing
// runs the prompt in the schedule's session and shows in the
// description), pause and unpause, delete (the session stays).
func TestScheduleRoutes(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	m := model(t, `{"repeat":true,"turns":[{"text":["report ready"]}]}`)
	// Every 30 days (Temporal counts intervals from the epoch): an hourly
	// schedule fired on its own at the top of an hour during the test.
	r := s.call(t, http.MethodPost, "/v1/schedules", map[string]any{"id": "gw-sched", "every": "720h",
		"prompt": "Write the report.", "config": map[string]any{"model": m, "tools": []string{}}}).must(t, http.StatusCreated)
	st := scheduleStatus(t, r)
	if st.Schedule.ID != "gw-sched" || st.Schedule.Every != keel.Duration(720*time.Hour) || st.Paused || len(st.Next) == 0 ||
		st.Schedule.Config == nil || st.Schedule.Config.Model != m {
		t.Fatalf("created: %s", r.raw)
	}
	if got := s.call(t, http.MethodPost, "/v1/schedules", map[string]any{"id": "gw-sched", "every": "1h", "prompt": "again"}); got.status != http.StatusBadRequest {
		t.Fatalf("an ID in use: %d %s", got.status, got.raw)
	}
	s.listed(t, "gw-sched")

	r = s.call(t, http.MethodPatch, "/v1/schedules/gw-sched", map[string]any{"prompt": "Write the weekly report.",
		"cron": "0 9 * * 1", "timezone": "Europe/Berlin"}).must(t, http.StatusOK)
	if st = scheduleStatus(t, r); st.Schedule.Prompt != "Write the weekly report." || st.Schedule.Cron != "0 9 * * 1" ||
		st.Schedule.Every != keel.Duration(720*time.Hour) || st.Schedule.Config.Model != m {
		t.Fatalf("changed: %s", r.raw)
	}
	s.call(t, http.MethodPost, "/v1/schedules/gw-sched/trigger", nil).must(t, http.StatusAccepted)
	st = s.waitSchedule(t, "gw-sched", "the firing's run to end", func(st gateway.ScheduleStatus) bool {
		return len(st.Recent) == 1 && st.Recent[0].Run == keel.StatusCompleted
	})
	if f := st.Recent[0]; f.Status != api.FiringSent || f.Result == nil || f.Result.Session != "gw-sched" || f.Result.RunID != "gw-sched/run-1" {
		t.Fatalf("firing: %+v", f)
	}
	var page gateway.EventsPage
	if err := json.Unmarshal(s.call(t, http.MethodGet, "/v1/sessions/gw-sched/events", nil).must(t, http.StatusOK).raw, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Events) == 0 || !strings.Contains(string(page.Events[0].Data), "Write the weekly report.") {
		t.Fatalf("the session's first event: %+v", page.Events)
	}

	s.call(t, http.MethodPost, "/v1/schedules/gw-sched/pause", map[string]any{"note": "holidays"}).must(t, http.StatusOK)
	st = scheduleStatus(t, s.call(t, http.MethodGet, "/v1/schedules/gw-sched", nil).must(t, http.StatusOK))
	if !st.Paused || st.Note != "holidays" || len(st.Next) != 0 {
		t.Fatalf("paused: %+v", st)
	}
	s.call(t, http.MethodPost, "/v1/schedules/gw-sched/unpause", nil).must(t, http.StatusOK)
	if st = scheduleStatus(t, s.call(t, http.MethodGet, "/v1/schedules/gw-sched", nil).must(t, http.StatusOK)); st.Paused {
		t.Fatalf("unpaused: %+v", st)
	}
	s.call(t, http.MethodDelete, "/v1/schedules/gw-sched", nil).must(t, http.StatusOK)
	if r := s.call(t, http.MethodGet, "/v1/schedules/gw-sched", nil); r.status != http.StatusNotFound || r.code() != "not_found" {
		t.Fatalf("after delete: %d %s", r.status, r.raw)
	}
	s.call(t, http.MethodGet, "/v1/sessions/gw-sched", nil).must(t, http.StatusOK)
}

// TestScheduleRoutesRefuseHostileInput: what a caller sends is checked
// before anything is made: bad IDs, sizes, names that are paths, fields
// the API does not take (a run's timeouts), a model the worker does not
// offer; each is typed, and no schedule appears.
func TestScheduleRoutesRefuseHostileInput(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	for name, c := range map[string]struct {
		body   any
		status int
	}{
		"no body":             {nil, http.StatusBadRequest},
		"an unknown field":    {map[string]any{"id": "gw-h1", "every": "1h", "prompt": "x", "command": "rm -rf /"}, http.StatusBadRequest},
		"a run timeout":       {map[string]any{"id": "gw-h2", "every": "1h", "prompt": "x", "config": map[string]any{"model_timeout": "1000h"}}, http.StatusBadRequest},
		"a path as ID":        {map[string]any{"id": "../etc", "every": "1h", "prompt": "x"}, http.StatusBadRequest},
		"markup as ID":        {map[string]any{"id": "<script>", "every": "1h", "prompt": "x"}, http.StatusBadRequest},
		"a long ID":           {map[string]any{"id": strings.Repeat("a", api.MaxScheduleIDLength+1), "every": "1h", "prompt": "x"}, http.StatusBadRequest},
		"a path as session":   {map[string]any{"id": "gw-h3", "every": "1h", "prompt": "x", "session": "../../x"}, http.StatusBadRequest},
		"a file as model":     {map[string]any{"id": "gw-h4", "every": "1h", "prompt": "x", "config": map[string]any{"model": "scripted:/etc/shadow"}}, http.StatusBadRequest},
		"a path as tool":      {map[string]any{"id": "gw-h5", "every": "1h", "prompt": "x", "config": map[string]any{"tools": []string{"/bin/sh"}}}, http.StatusBadRequest},
		"a tool not offered":  {map[string]any{"id": "gw-h6", "every": "1h", "prompt": "x", "config": map[string]any{"tools": []string{"shell"}}}, http.StatusBadRequest},
		"a huge prompt":       {map[string]any{"id": "gw-h7", "every": "1h", "prompt": strings.Repeat("x", api.MaxPromptBytes+1)}, http.StatusRequestEntityTooLarge},
		"a control in cron":   {map[string]any{"id": "gw-h8", "cron": "0 9 * * 1\x1b[31m", "prompt": "x"}, http.StatusBadRequest},
		"a zone path":         {map[string]any{"id": "gw-h9", "cron": "@daily", "timezone": "../../../etc/passwd", "prompt": "x"}, http.StatusBadRequest},
		"every millisecond":   {map[string]any{"id": "gw-h10", "every": "1ms", "prompt": "x"}, http.StatusBadRequest},
		"a negative jitter":   {map[string]any{"id": "gw-h11", "every": "1h", "jitter": "-1h", "prompt": "x"}, http.StatusBadRequest},
		"a bad overlap":       {map[string]any{"id": "gw-h12", "every": "1h", "prompt": "x", "overlap": "drop"}, http.StatusBadRequest},
		"a tiny catch-up":     {map[string]any{"id": "gw-h13", "every": "1h", "prompt": "x", "catchup_window": "1s"}, http.StatusBadRequest},
		"negative max_tokens": {map[string]any{"id": "gw-h14", "every": "1h", "prompt": "x", "config": map[string]any{"max_tokens": -1}}, http.StatusBadRequest},
		"a huge output schema": {map[string]any{"id": "gw-h15", "every": "1h", "prompt": "x",
			"config": map[string]any{"output_schema": map[string]any{"description": strings.Repeat("x", api.MaxOutputSchemaBytes)}}}, http.StatusRequestEntityTooLarge},
		"an expanding output schema": {map[string]any{"id": "gw-h16", "every": "1h", "prompt": "x",
			"config": map[string]any{"output_schema": expandingSchema(20)}}, http.StatusBadRequest},
	} {
		r := s.call(t, http.MethodPost, "/v1/schedules", c.body)
		if r.status != c.status || r.code() == "" {
			t.Errorf("%s: %d %s, want %d", name, r.status, r.raw, c.status)
		}
		if strings.Contains(string(r.raw), "/etc/shadow") || strings.Contains(string(r.raw), "<script>") {
			t.Errorf("%s: the answer repeats the value: %s", name, r.raw)
		}
	}
	for _, path := range []string{"/v1/schedules/..%2Fetc", "/v1/schedules/" + strings.Repeat("a", 200), "/v1/schedules/a%00b"} {
		if r := s.call(t, http.MethodGet, path, nil); r.status != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s", path, r.status, r.raw)
		}
	}
	if ids := s.listed(t); len(ids) > 0 {
		for _, id := range ids {
			if strings.HasPrefix(id, "gw-h") {
				t.Errorf("a refused schedule exists: %s", id)
			}
		}
	}
}

// TestScheduleKeyRules attacks the schedule routes with narrowed keys: a
// read-only key lists and describes, and gets 403 for every change; a
// key limited to a prefix creates only schedules whose ID and session
// are under it (a new session each firing is, by its ID), cannot move
// one out of it, and sees every other schedule as missing: one named
// under its prefix but sending to another session included.
func TestScheduleKeyRules(t *testing.T) {
	const (
		full   = "sched-full-0123456789"
		read   = "sched-read-0123456789"
		team   = "sched-team-0123456789"
		prefix = "schk-a-"
	)
	s := startGateway(t, gateway.Options{Keys: []gateway.APIKey{{Key: full}, {Key: read, Scope: gateway.ScopeRead},
		{Key: team, Prefix: prefix}}})
	as := s.as
	m := model(t, `{"repeat":true,"turns":[{"text":["ok"]}]}`)
	cfg := map[string]any{"model": m}
	admin, ro, tm := as(full), as(read), as(team)

	// The operator's schedules: one outside the prefix, and one named
	// under it whose firings go to a session outside it, which only a
	// client of Temporal's own may make (no key may).
	admin.call(t, http.MethodPost, "/v1/schedules", map[string]any{"id": "schk-admin", "every": "1h", "prompt": "x", "config": cfg}).
		must(t, http.StatusCreated)
	if err := newClient(t, 0).CreateSchedule(testCtx(t), api.Schedule{ID: prefix + "decoy",
		ScheduleSpec: api.ScheduleSpec{Every: keel.Duration(time.Hour)}, Prompt: "x", Session: "schk-admin-session",
		Config: &api.RunConfig{Model: m}}); err != nil {
		t.Fatal(err)
	}

	// Read-only.
	ro.listed(t, "schk-admin")
	ro.call(t, http.MethodGet, "/v1/schedules/schk-admin", nil).must(t, http.StatusOK)
	for _, w := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/v1/schedules", map[string]any{"id": "schk-ro", "every": "1h", "prompt": "x"}},
		{http.MethodPatch, "/v1/schedules/schk-admin", map[string]any{"prompt": "y"}},
		{http.MethodDelete, "/v1/schedules/schk-admin", nil},
		{http.MethodPost, "/v1/schedules/schk-admin/pause", nil},
		{http.MethodPost, "/v1/schedules/schk-admin/unpause", nil},
		{http.MethodPost, "/v1/schedules/schk-admin/trigger", nil},
	} {
		if r := ro.call(t, w.method, w.path, w.body); r.status != http.StatusForbidden || r.code() != gateway.CodeForbidden {
			t.Errorf("read-only %s %s: %d %s", w.method, w.path, r.status, r.raw)
		}
	}

	// Prefix: creation.
	for name, body := range map[string]map[string]any{
		"an ID outside":                   {"id": "schk-b-x", "every": "1h", "prompt": "x", "config": cfg},
		"an ID that is the prefix, short": {"id": strings.TrimSuffix(prefix, "-"), "new_session": true, "every": "1h", "prompt": "x", "config": cfg},
		"a session outside":               {"id": prefix + "x", "session": "schk-admin-session", "every": "1h", "prompt": "x", "config": cfg},
	} {
		if r := tm.call(t, http.MethodPost, "/v1/schedules", body); r.status != http.StatusForbidden {
			t.Errorf("prefix key, %s: %d %s", name, r.status, r.raw)
		}
	}
	tm.call(t, http.MethodPost, "/v1/schedules", map[string]any{"id": prefix + "own", "every": "1h", "prompt": "x", "config": cfg}).
		must(t, http.StatusCreated)
	tm.call(t, http.MethodPost, "/v1/schedules", map[string]any{"id": prefix + "fresh", "new_session": true, "every": "1h", "prompt": "x",
		"config": cfg}).must(t, http.StatusCreated)

	// Prefix: what it does not reach is missing, whatever the route.
	for _, id := range []string{"schk-admin", prefix + "decoy", "schk-none"} {
		for _, w := range []struct {
			method, path string
			body         any
		}{
			{http.MethodGet, "/v1/schedules/" + id, nil},
			{http.MethodPatch, "/v1/schedules/" + id, map[string]any{"session": prefix + "mine"}},
			{http.MethodDelete, "/v1/schedules/" + id, nil},
			{http.MethodPost, "/v1/schedules/" + id + "/pause", nil},
			{http.MethodPost, "/v1/schedules/" + id + "/unpause", nil},
			{http.MethodPost, "/v1/schedules/" + id + "/trigger", nil},
		} {
			r := tm.call(t, w.method, w.path, w.body)
			if r.status != http.StatusNotFound || r.body["message"] != "schedule "+id+" not found" {
				t.Errorf("prefix key %s %s: %d %s", w.method, w.path, r.status, r.raw)
			}
		}
	}
	ids := tm.listed(t, prefix+"own", prefix+"fresh")
	for _, id := range ids {
		if !strings.HasPrefix(id, prefix) || id == prefix+"decoy" {
			t.Errorf("prefix key lists %s", id)
		}
	}
	// It cannot move its own schedule's firings out of its prefix.
	if r := tm.call(t, http.MethodPatch, "/v1/schedules/"+prefix+"own", map[string]any{"session": "schk-admin-session"}); r.status != http.StatusForbidden {
		t.Errorf("moving out: %d %s", r.status, r.raw)
	}
	// Its new-session schedule's firing makes a session under the prefix.
	tm.call(t, http.MethodPost, "/v1/schedules/"+prefix+"fresh/trigger", nil).must(t, http.StatusAccepted)
	st := tm.waitSchedule(t, prefix+"fresh", "the firing", func(st gateway.ScheduleStatus) bool {
		return len(st.Recent) == 1 && st.Recent[0].Result != nil
	})
	sess := st.Recent[0].Result.Session
	if !strings.HasPrefix(sess, prefix+"fresh-") {
		t.Fatalf("the firing's session %s", sess)
	}
	tm.call(t, http.MethodGet, "/v1/sessions/"+sess, nil).must(t, http.StatusOK)
	// The decoy is untouched.
	if st := scheduleStatus(t, admin.call(t, http.MethodGet, "/v1/schedules/"+prefix+"decoy", nil).must(t, http.StatusOK)); st.Paused ||
		st.Fired != 0 || st.Schedule.Session != "schk-admin-session" {
		t.Fatalf("decoy: %+v", st)
	}
	for _, id := range []string{"schk-admin", prefix + "decoy", prefix + "own", prefix + "fresh"} {
		admin.call(t, http.MethodDelete, "/v1/schedules/"+id, nil).must(t, http.StatusOK)
	}
}

// expandingSchema is the schema of docs/security.md's first attack: each
// of depth levels of $defs an anyOf of two references to the level below,
// so a check of one value would take 2^depth steps.
func expandingSchema(depth int) map[string]any {
	defs := map[string]any{"l0": map[string]any{"type": "string"}}
	for i := 1; i <= depth; i++ {
		below := map[string]any{"$ref": fmt.Sprintf("#/$defs/l%d", i-1)}
		defs[fmt.Sprintf("l%d", i)] = map[string]any{"anyOf": []any{below, below}}
	}
	return map[string]any{"$defs": defs, "$ref": fmt.Sprintf("#/$defs/l%d", depth)}
}
