package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/gateway"
)

// The workflows' limit errors (docs/contract.md §18) answer 413 for a
// value over its size and 429 with Retry-After for a full count, with
// their typed bodies.
func TestLimitErrorStatuses(t *testing.T) {
	for _, tc := range []struct {
		err        *keel.Error
		status     int
		code       string
		retryAfter bool
	}{
		{keel.Errorf(keel.CodeTooLarge, "the prompt is 300000 bytes; the limit is 262144"), http.StatusRequestEntityTooLarge, "too_large", false},
		{&keel.Error{Code: keel.CodeTooMany, Message: "32 prompts are queued", Retryable: true}, http.StatusTooManyRequests, "too_many", true},
	} {
		rec := httptest.NewRecorder()
		gateway.WriteError(rec, tc.err)
		if rec.Code != tc.status {
			t.Errorf("%s: status %d, want %d", tc.err.Code, rec.Code, tc.status)
		}
		var body gateway.Error
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		if body.Code != tc.code || body.KeelCode != tc.err.Code || body.Message != tc.err.Message {
			t.Errorf("%s: body %+v", tc.err.Code, body)
		}
		if got := rec.Header().Get("Retry-After") != ""; got != tc.retryAfter {
			t.Errorf("%s: Retry-After %q", tc.err.Code, rec.Header().Get("Retry-After"))
		}
	}
}
