package gateway

import (
	"context"
	"net/http"
	"strings"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

// Schedules over HTTP (docs/contract.md §22). A key limited to a session
// prefix reaches only the schedules whose IDs are under its prefix and
// whose firings send there: a fixed session under the prefix, or a new
// session each firing, whose ID (the schedule's ID and the time) is
// under it too. Any other schedule answers 404 as one that does not
// exist; a read-only key may list and describe only.

// The schedules GET /v1/schedules lists: limit= of them, by default
// DefaultSchedulesLimit and at most MaxSchedulesLimit.
const (
	DefaultSchedulesLimit = 50
	MaxSchedulesLimit     = 200
)

func (g *Gateway) routeSchedules() {
	// The path names no session: each handler checks the key's prefix.
	route := func(method, path string, h http.Handler) {
		g.handle(Route{Method: method, Path: path, sessions: true}, h)
	}
	route(http.MethodGet, "/v1/schedules", http.HandlerFunc(g.listSchedules))
	route(http.MethodPost, "/v1/schedules", http.HandlerFunc(g.postSchedule))
	route(http.MethodGet, "/v1/schedules/{name}", g.schedule(g.getSchedule))
	route(http.MethodPatch, "/v1/schedules/{name}", g.schedule(g.patchSchedule))
	route(http.MethodDelete, "/v1/schedules/{name}", g.schedule(g.deleteSchedule))
	route(http.MethodPost, "/v1/schedules/{name}/pause", g.schedule(g.pauseSchedule))
	route(http.MethodPost, "/v1/schedules/{name}/unpause", g.schedule(g.unpauseSchedule))
	route(http.MethodPost, "/v1/schedules/{name}/trigger", g.schedule(g.triggerSchedule))
}

// reaches reports whether the request's key may reach a schedule with
// this ID that sends to target ("" for a new session each firing).
func reaches(r *http.Request, id, target string) bool {
	k := requestKey(r)
	if k == nil || k.prefix == "" {
		return true
	}
	return strings.HasPrefix(id, k.prefix) && strings.HasPrefix(api.Schedule{ID: id, Session: target}.Target(), k.prefix)
}

// claimedPrefix returns the prefix of a key of the gateway that claims a
// schedule with this ID that sends to target ("" for a new session each
// firing) but does not reach it: its ID is under the prefix and its
// firings go outside. No key may make such a schedule, the full keys
// included, since the prefix's keys would see it as missing yet find its
// ID taken (docs/security.md).
func (g *Gateway) claimedPrefix(id, target string) (string, bool) {
	if target == "" {
		return "", false // its sessions are named after its ID
	}
	for _, k := range g.keys.keys {
		if k.prefix != "" && strings.HasPrefix(id, k.prefix) && !strings.HasPrefix(target, k.prefix) {
			return k.prefix, true
		}
	}
	return "", false
}

// checkClaims refuses a schedule that claimedPrefix finds.
func (g *Gateway) checkClaims(s api.Schedule) error {
	if prefix, ok := g.claimedPrefix(s.ID, s.Target()); ok {
		return keel.Errorf(keel.CodeInvalidInput,
			"a schedule whose ID starts with %s, the prefix of an API key, must send to a session under it too", prefix)
	}
	return nil
}

// scheduleNotFound answers for a schedule that does not exist or that the
// key does not reach: the same words either way.
func scheduleNotFound(id string) error {
	return keel.Errorf(keel.CodeNotFound, "schedule %s not found", id)
}

// scheduleHandler serves one schedule's route, with its definition read
// and checked against the key.
type scheduleHandler func(w http.ResponseWriter, r *http.Request, h *client.Schedule, s api.Schedule)

// schedule checks the {name} of the path, reads the schedule, and hands
// it on if the key reaches it.
func (g *Gateway) schedule(next scheduleHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("name")
		if err := api.ValidateScheduleID(id); err != nil {
			WriteError(w, err)
			return
		}
		if !reaches(r, id, id) {
			WriteError(w, scheduleNotFound(id))
			return
		}
		ctx, cancel := g.callCtx(r)
		defer cancel()
		h := g.c.Schedule(id)
		s, err := h.Get(ctx)
		if err != nil {
			WriteError(w, err)
			return
		}
		if !reaches(r, id, s.Target()) {
			WriteError(w, scheduleNotFound(id))
			return
		}
		next(w, r, h, s)
	})
}

func (g *Gateway) listSchedules(w http.ResponseWriter, r *http.Request) {
	limit, err := intParam(r, "limit", DefaultSchedulesLimit, 1)
	if err != nil {
		WriteError(w, err)
		return
	}
	limit = min(limit, MaxSchedulesLimit)
	var prefix string
	if k := requestKey(r); k != nil {
		prefix = k.prefix
	}
	ctx, cancel := g.callCtx(r)
	defer cancel()
	// What the key reaches, read from the list itself: a prefix costs
	// no call per schedule.
	list, truncated, err := g.c.Schedules(ctx, client.ScheduleListOptions{Prefix: prefix, Under: prefix, Limit: int(limit)})
	if err != nil {
		WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, SchedulesResponse{Schedules: list, Truncated: truncated})
}

func (g *Gateway) postSchedule(w http.ResponseWriter, r *http.Request) {
	var body Schedule
	if err := ReadJSON(r, &body); err != nil {
		WriteError(w, err)
		return
	}
	s := body.schedule()
	if err := s.Validate(api.Limits{}); err != nil {
		WriteError(w, err)
		return
	}
	if err := checkMaxTokens(s.Config); err != nil {
		WriteError(w, err)
		return
	}
	// Refused before anything is read: the answer is the same whether a
	// schedule with this ID exists or not.
	if !reaches(r, s.ID, s.Target()) {
		writeError(w, apiError(http.StatusForbidden, CodeForbidden,
			"this API key is limited to a session prefix: the schedule's ID and its session must be under it"))
		return
	}
	if err := g.checkClaims(s); err != nil {
		WriteError(w, err)
		return
	}
	var owner string
	if k := requestKey(r); k != nil {
		owner = k.prefix
	}
	ctx, cancel := g.callCtx(r)
	defer cancel()
	if err := g.c.CreateSchedule(ctx, s, client.OwnedBy(owner)); err != nil {
		WriteError(w, err)
		return
	}
	g.writeSchedule(w, r, g.c.Schedule(s.ID), http.StatusCreated)
}

// writeSchedule answers with the schedule's description.
func (g *Gateway) writeSchedule(w http.ResponseWriter, r *http.Request, h *client.Schedule, status int) {
	ctx, cancel := g.callCtx(r)
	defer cancel()
	st, err := h.Describe(ctx)
	if err != nil {
		WriteError(w, err)
		return
	}
	writeJSON(w, status, scheduleStatusOf(st))
}

func (g *Gateway) getSchedule(w http.ResponseWriter, r *http.Request, h *client.Schedule, _ api.Schedule) {
	g.writeSchedule(w, r, h, http.StatusOK)
}

func (g *Gateway) patchSchedule(w http.ResponseWriter, r *http.Request, h *client.Schedule, cur api.Schedule) {
	var body ScheduleChange
	if err := ReadJSON(r, &body); err != nil {
		WriteError(w, err)
		return
	}
	change := body.change()
	next := change.Apply(cur)
	if err := next.Validate(api.Limits{}); err != nil {
		WriteError(w, err)
		return
	}
	if err := checkMaxTokens(next.Config); err != nil {
		WriteError(w, err)
		return
	}
	if !reaches(r, next.ID, next.Target()) {
		writeError(w, apiError(http.StatusForbidden, CodeForbidden,
			"this API key is limited to a session prefix: the schedule's session must stay under it"))
		return
	}
	if err := g.checkClaims(next); err != nil {
		WriteError(w, err)
		return
	}
	ctx, cancel := g.callCtx(r)
	defer cancel()
	if _, err := h.Update(ctx, change); err != nil {
		WriteError(w, err)
		return
	}
	g.writeSchedule(w, r, h, http.StatusOK)
}

func (g *Gateway) deleteSchedule(w http.ResponseWriter, r *http.Request, h *client.Schedule, _ api.Schedule) {
	ctx, cancel := g.callCtx(r)
	defer cancel()
	if err := h.Delete(ctx); err != nil {
		WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, StatusResponse{Status: "deleted"})
}

func (g *Gateway) pauseSchedule(w http.ResponseWriter, r *http.Request, h *client.Schedule, _ api.Schedule) {
	g.noteSchedule(w, r, "paused", h.Pause)
}

func (g *Gateway) unpauseSchedule(w http.ResponseWriter, r *http.Request, h *client.Schedule, _ api.Schedule) {
	g.noteSchedule(w, r, "unpaused", h.Unpause)
}

// noteSchedule serves pause and unpause, whose body (a note) is optional.
func (g *Gateway) noteSchedule(w http.ResponseWriter, r *http.Request, status string,
	act func(ctx context.Context, note string) error) {
	var body ScheduleNote
	if r.ContentLength != 0 {
		if err := ReadJSON(r, &body); err != nil {
			WriteError(w, err)
			return
		}
	}
	ctx, cancel := g.callCtx(r)
	defer cancel()
	if err := act(ctx, body.Note); err != nil {
		WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, StatusResponse{Status: status})
}

func (g *Gateway) triggerSchedule(w http.ResponseWriter, r *http.Request, h *client.Schedule, _ api.Schedule) {
	ctx, cancel := g.callCtx(r)
	defer cancel()
	if err := h.Trigger(ctx); err != nil {
		WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, StatusResponse{Status: "triggered"})
}
