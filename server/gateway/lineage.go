package gateway

import (
	"encoding/json"
	"net/http"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// What a key limited to a prefix learns of a session's lineage
// (docs/security.md, "Lineage"; docs/contract.md §19.1). A fork's source
// may lie outside the prefix: an unlimited key, or one with a shorter
// prefix, forked another team's session into this one's. The key reads
// the fork, whose conversation is its own, but nothing that names or
// measures the source: the source's ID is withheld ("source" is empty)
// and so is the source's last sequence at the point ("seq" is 0), which
// counts the source's log. The point (run, step), the revision the fork
// went on from and its messages stay: they say where the fork's own
// conversation begins, which its history and revision show anyway.
//
// A child session (docs/contract.md §21.3) is named after its parent
// ("<parent>--researcher-1-<drawn>"), so a key covering a parent covers
// its children; one covering a child need not cover its parent. Such a key
// reads the child, whose run is its own, but not which run and call of
// the parent delegated to it, the workflow it reports to, or the
// sessions its deltas are relayed to outside the prefix (visibleDelegation).
//
// Every route that carries lineage goes through here: a session's state
// (parent, delegated), its events as a page and as Server-Sent Events
// (session.forked). The forks list asks only for forks under the prefix
// (getForks); AG-UI streams one run's events, never the session's own;
// a fork's answer names the session in the path, which the key covers.

// visibleOrigin returns o as the request's key may see it.
func visibleOrigin(r *http.Request, o *api.ForkOrigin) *api.ForkOrigin {
	if o == nil || allowsSession(r, o.Source) {
		return o
	}
	hidden := *o
	hidden.Source, hidden.Seq = "", 0
	return &hidden
}

// visibleDelegation returns d as the request's key may see it: when the
// key does not cover the parent, without the parent's ID, run, workflow
// and tool call, and with only the relay targets the key covers. The
// agent, the child's path and depth, and the task (the child's own
// prompt) stay.
func visibleDelegation(r *http.Request, d *api.Delegation) *api.Delegation {
	if d == nil || allowsSession(r, d.Parent) {
		return d
	}
	hidden := api.Delegation{Agent: d.Agent, Path: d.Path, Depth: d.Depth, Prompt: d.Prompt}
	for _, t := range d.Relay {
		if allowsSession(r, t.SessionID) {
			hidden.Relay = append(hidden.Relay, t)
		}
	}
	return &hidden
}

// visibleEvent returns env as the request's key may see it: a
// session.forked whose source the key does not cover has its data
// rebuilt without the source's ID and sequence. Data that does not
// decode is rebuilt from nothing, so no field of it reaches the key;
// every other event is returned as it is.
func visibleEvent(r *http.Request, env keel.Envelope) keel.Envelope {
	if k := requestKey(r); env.Type != keel.TypeSessionForked || k == nil || k.prefix == "" {
		return env
	}
	var f keel.SessionForked
	if err := json.Unmarshal(env.Data, &f); err == nil && allowsSession(r, f.Source) {
		return env
	}
	hidden := keel.SessionForked{Run: f.Run, Step: f.Step, Revision: f.Revision, Messages: f.Messages}
	data, err := json.Marshal(hidden)
	if err != nil {
		data = json.RawMessage("{}")
	}
	env.Data = data
	return env
}
