package httpguard

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// A JSON endpoint takes application/json (with charset=utf-8 at most);
// the types a browser sends cross-origin without a preflight, and
// anything else, get 415.
func TestRequireJSON(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json":                    true,
		"application/json; charset=utf-8":     true,
		"Application/JSON;charset=UTF-8":      true,
		"text/plain":                          false,
		"text/plain; charset=utf-8":           false,
		"application/x-www-form-urlencoded":   false,
		"multipart/form-data; boundary=x":     false,
		"application/json; charset=latin1":    false,
		"application/json; foo=bar":           false,
		"application/jsonx":                   false,
		"application/vnd.api+json":            false,
		"":                                    false,
		"application/json;":                   true,
		"application/json; charset=\"utf-8\"": true,
		"application/json, text/plain":        false,
	} {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		e := RequireJSON(r)
		if (e == nil) != want {
			t.Errorf("Content-Type %q: %v, want allowed %v", ct, e, want)
		}
		if e != nil && (e.Status != http.StatusUnsupportedMediaType || e.Code != CodeUnsupportedMediaType) {
			t.Errorf("Content-Type %q: %+v", ct, e)
		}
	}
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Header.Add("Content-Type", "application/json")
	r.Header.Add("Content-Type", "text/plain")
	if RequireJSON(r) == nil {
		t.Error("two Content-Type headers passed")
	}
}
