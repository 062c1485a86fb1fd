package httpguard

import (
	"mime"
	"net/http"
	"strings"
)

// RequireJSON refuses a request whose body is not declared JSON:
// Content-Type must be application/json, with at most a charset
// parameter, and that utf-8 (JSON is UTF-8, RFC 8259). A browser sends a
// cross-origin POST without asking the server first only with a form or
// text/plain type; a JSON endpoint that insists on application/json is out
// of that request's reach even where the origin check cannot tell (an old
// browser, a proxy that drops Origin).
func RequireJSON(r *http.Request) *Error {
	if jsonMediaType(r.Header.Values("Content-Type")) {
		return nil
	}
	return &Error{Status: http.StatusUnsupportedMediaType, Code: CodeUnsupportedMediaType,
		Message: "the request body must be JSON, sent with Content-Type: application/json (curl: -H 'Content-Type: application/json')"}
}

// jsonMediaType reports whether the Content-Type header values declare
// JSON: exactly one value, application/json, no parameter but
// charset=utf-8.
func jsonMediaType(values []string) bool {
	if len(values) != 1 {
		return false
	}
	mt, params, err := mime.ParseMediaType(values[0])
	if err != nil || mt != "application/json" {
		return false
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return false
		}
	}
	return true
}
