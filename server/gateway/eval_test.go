package gateway_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/keelrun/keel/server/gateway"
)

// Evals over HTTP (docs/contract.md §24): a dataset case that names a
// file is refused before anything runs; a prefix key starts evals only
// under its prefix and sees no other; an eval runs to its report.
func TestEvalsOverHTTP(t *testing.T) {
	const (
		full = "eval-http-full-0123456789"
		team = "eval-http-team-0123456789"
	)
	s := startGateway(t, gateway.Options{Keys: []gateway.APIKey{{Key: full}, {Key: team, Prefix: "evt-"}}})
	admin, tm := s.as(full), s.as(team)
	m := model(t, `{"repeat":true,"turns":[{"text":["42"]}]}`)
	candidate := map[string]any{"model": m, "tools": []string{}}

	hostile := map[string]any{"id": "evh-bad", "candidate": candidate, "cases": []any{map[string]any{"id": "a", "prompt": "x",
		"attachments": []any{map[string]any{"path": "/etc/passwd"}}}}}
	if r := admin.call(t, http.MethodPost, "/v1/evals", hostile); r.status != http.StatusBadRequest {
		t.Fatalf("an attachment by path: %d %s", r.status, r.raw)
	}
	if r := tm.call(t, http.MethodPost, "/v1/evals", map[string]any{"id": "outside", "candidate": candidate,
		"cases": []any{map[string]any{"prompt": "x", "id": "a"}}}); r.status != http.StatusForbidden {
		t.Fatalf("an eval outside the key's prefix: %d %s", r.status, r.raw)
	}
	tm.call(t, http.MethodPost, "/v1/evals", map[string]any{"id": "evt-1", "candidate": candidate,
		"cases": []any{map[string]any{"id": "a", "prompt": "6*7?", "expect": map[string]any{"contains": []string{"42"}}}}}).
		must(t, http.StatusAccepted)
	if r := tm.call(t, http.MethodGet, "/v1/evals/evh-bad", nil); r.status != http.StatusNotFound {
		t.Fatalf("an eval outside the key's prefix: %d %s", r.status, r.raw)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		r := tm.call(t, http.MethodGet, "/v1/evals/evt-1/report", nil)
		if r.status == http.StatusOK {
			cand, _ := r.body["candidate"].(map[string]any)
			if cand["passed"] != float64(1) || cand["pass_rate"] != float64(1) {
				t.Fatalf("report %s", r.raw)
			}
			break
		}
		if r.status != http.StatusConflict || time.Now().After(deadline) {
			t.Fatalf("report: %d %s", r.status, r.raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := tm.call(t, http.MethodGet, "/v1/evals/evt-1", nil).must(t, http.StatusOK)
	if r.body["state"] != "completed" || r.body["done"] != float64(1) {
		t.Fatalf("status %s", r.raw)
	}
}
