package hook_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/hook"
)

var testEvents = []keel.Envelope{
	{Seq: 3, Type: keel.TypeHookDecided, SessionID: "sess-1", RunID: "run-1", At: time.Unix(1700000000, 0).UTC(), Data: json.RawMessage(`{"hook":"audit"}`)},
	{Seq: 4, Type: keel.TypeRunCompleted, SessionID: "sess-1", RunID: "run-1", At: time.Unix(1700000001, 0).UTC(), Data: json.RawMessage(`{}`)},
}

// newSink serves handler and returns an HTTP sink posting to it, with a
// transport that counts the bytes read of every answer.
func newSink(t *testing.T, timeout time.Duration, handler http.HandlerFunc) (*hook.HTTPSink, *countingTransport) {
	t.Helper()
	srv := newServer(t, handler)
	rt := &countingTransport{base: srv.Client().Transport}
	s, err := hook.NewHTTPSink(hook.HTTPSinkConfig{Name: "archive", URL: srv.URL + "/keel", Secret: testSecret, Timeout: timeout, Transport: rt})
	if err != nil {
		t.Fatal(err)
	}
	return s, rt
}

// A delivery is a signed POST of the session's events, keyed by its first
// and last sequence number.
func TestHTTPSinkDeliver(t *testing.T) {
	var got struct {
		SessionID string          `json:"session_id"`
		Events    []keel.Envelope `json:"events"`
	}
	s, _ := newSink(t, 0, func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := hook.Verify(testSecret, r.Header.Get(hook.SignatureHeader), body, time.Now(), 0); err != nil {
			t.Errorf("signature: %v", err)
		}
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" ||
			r.Header.Get("Keel-Session") != "sess-1" || r.Header.Get("Idempotency-Key") != "sess-1:3-4" {
			t.Errorf("%s with headers %v", r.Method, r.Header)
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Error(err)
		}
		rw.WriteHeader(http.StatusAccepted)
	})
	if err := s.Deliver(context.Background(), "sess-1", testEvents); err != nil {
		t.Fatal(err)
	}
	if got.SessionID != "sess-1" {
		t.Errorf("session_id %q", got.SessionID)
	}
	if diff := cmp.Diff(testEvents, got.Events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// Nothing to deliver sends nothing.
func TestHTTPSinkNoEvents(t *testing.T) {
	var posts atomic.Int32
	s, _ := newSink(t, 0, func(http.ResponseWriter, *http.Request) { posts.Add(1) })
	if err := s.Deliver(context.Background(), "sess-1", nil); err != nil || posts.Load() != 0 {
		t.Errorf("Deliver of no events: %v, %d posts", err, posts.Load())
	}
}

// Anything but a 2xx is a retryable failure, a redirect too, and the
// other host never sees the delivery.
func TestHTTPSinkFailures(t *testing.T) {
	var contacted atomic.Int32
	other := newServer(t, func(http.ResponseWriter, *http.Request) { contacted.Add(1) })
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		msg     string
	}{
		{"server error", func(rw http.ResponseWriter, r *http.Request) {
			http.Error(rw, "secret-body", http.StatusInternalServerError)
		}, "sink archive: answered status 500"},
		{"refused", func(rw http.ResponseWriter, r *http.Request) {
			http.Error(rw, "secret-body", http.StatusBadRequest)
		}, "sink archive: answered status 400"},
		{"redirect", func(rw http.ResponseWriter, r *http.Request) {
			http.Redirect(rw, r, other.URL+"/steal", http.StatusTemporaryRedirect)
		}, "sink archive: redirect refused (status 307)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newSink(t, 0, tc.handler)
			err := s.Deliver(context.Background(), "sess-1", testEvents)
			wantFailure(t, err, keel.CodeHookFailed, true, tc.msg, "secret-body", other.URL, "/steal")
		})
	}
	if n := contacted.Load(); n != 0 {
		t.Errorf("the other host was contacted %d times", n)
	}
}

// A sink that never answers is cut at the timeout; one that answers at
// length is read no further than 64 KiB.
func TestHTTPSinkBounded(t *testing.T) {
	arrived := make(chan struct{}, 1)
	s, _ := newSink(t, 50*time.Millisecond, hang(t, arrived))
	err := s.Deliver(context.Background(), "sess-1", testEvents)
	wantFailure(t, err, keel.CodeHookFailed, true, "sink archive: timed out after 50ms")
	<-arrived

	s, rt := newSink(t, 0, func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(rw, strings.Repeat("z", 10<<20))
	})
	if err := s.Deliver(context.Background(), "sess-1", testEvents); err != nil {
		t.Errorf("a 2xx with a long body: %v", err)
	}
	if n := rt.read.Load(); n > hook.MaxSinkResponseBytes {
		t.Errorf("read %d bytes of the answer, want at most %d", n, hook.MaxSinkResponseBytes)
	}
}

func TestNewHTTPSinkRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  hook.HTTPSinkConfig
		want error
	}{
		{"plain http to another host", hook.HTTPSinkConfig{URL: "http://sink.example.com/", Secret: testSecret}, hook.ErrURL},
		{"no secret", hook.HTTPSinkConfig{URL: "https://sink.example.com/"}, hook.ErrNoSecret},
	} {
		if _, err := hook.NewHTTPSink(tc.cfg); !errors.Is(err, tc.want) || strings.Contains(err.Error(), "example.com") {
			t.Errorf("%s: NewHTTPSink = %v, want %v without the URL", tc.name, err, tc.want)
		}
	}
	if _, err := hook.NewHTTPSink(hook.HTTPSinkConfig{URL: "https://sink.example.com/", Secret: testSecret, Timeout: hook.MaxTimeout + 1}); err == nil {
		t.Error("a timeout over MaxTimeout was taken")
	}
}
