package httpguard

import (
	"encoding/json"
	"errors"
	"net/http"
)

// Codes of the errors a guard answers with. They are the gateway's codes
// for the same refusals, so a client switches on one set.
const (
	CodeHostNotAllowed       = "host_not_allowed"
	CodeOriginNotAllowed     = "origin_not_allowed"
	CodeUnsupportedMediaType = "unsupported_media_type"
)

// Error is a refused request: the HTTP status, a stable code and a message
// for people. The message never repeats more of the request than the host
// or origin it refuses.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// ErrConfig is wrapped by New's errors: an allowed host or trusted origin
// that is not one.
var ErrConfig = errors.New("httpguard: bad listener configuration")

// Write answers e: as JSON {"code","message"} when asJSON, else as plain
// text "code: message".
func (e *Error) Write(w http.ResponseWriter, asJSON bool) {
	h := w.Header()
	if asJSON {
		h.Set("Content-Type", "application/json")
		w.WriteHeader(e.Status)
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(e)
		return
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(e.Status)
	_, _ = w.Write([]byte(e.Error() + "\n"))
}
