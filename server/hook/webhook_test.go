package hook_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/hook"
)

var testCall = hook.Call{Hook: "audit", Point: keel.HookBeforeTool, Key: "sess-1/run-1/4/before_tool/call-7",
	SessionID: "sess-1", RunID: "run-1", Step: 4,
	Tool: &keel.ToolCall{ID: "call-7", Name: "write_file", Arguments: json.RawMessage(`{"path":"a.txt"}`)}}

// newWebhook serves handler and returns a webhook posting to it, with a
// transport that counts the bytes read of every answer.
func newWebhook(t *testing.T, spec hook.Spec, handler http.HandlerFunc) (*hook.Webhook, *httptest.Server, *countingTransport) {
	t.Helper()
	srv := newServer(t, handler)
	rt := &countingTransport{base: srv.Client().Transport}
	w, err := hook.NewWebhook(hook.WebhookConfig{URL: srv.URL + "/keel", Secret: testSecret, Spec: spec, Transport: rt})
	if err != nil {
		t.Fatal(err)
	}
	return w, srv, rt
}

// newServer starts handler, closed when the test ends.
func newServer(t *testing.T, handler http.HandlerFunc) *httptest.Server {
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv
}

// hang returns a handler that tells arrived it has the request and never
// answers: it waits for the client to go, or the test to end (the server
// notices a client gone only once the body is read).
func hang(t *testing.T, arrived chan<- struct{}) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-t.Context().Done():
		}
	}
}

// countingTransport counts the bytes read from response bodies.
type countingTransport struct {
	base http.RoundTripper
	read atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err == nil {
		resp.Body = countingBody{resp.Body, &c.read}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// wantFailure checks err is a *keel.Error with code, retryability and a
// message containing msg, and that none of leaks appears in it.
func wantFailure(t *testing.T, err error, code keel.Code, retryable bool, msg string, leaks ...string) {
	t.Helper()
	var ke *keel.Error
	if !errors.As(err, &ke) {
		t.Fatalf("error %v (%T), want a *keel.Error", err, err)
	}
	if ke.Code != code || ke.Retryable != retryable || !strings.Contains(ke.Message, msg) {
		t.Errorf("error %+v, want code %s, retryable %v, message with %q", ke, code, retryable, msg)
	}
	for _, leak := range append(leaks, string(testSecret), "127.0.0.1", "/keel") {
		if leak != "" && strings.Contains(ke.Error(), leak) {
			t.Errorf("error %q holds %q", ke.Error(), leak)
		}
	}
}

var beforeTool = hook.Spec{Points: []keel.HookPoint{keel.HookBeforeTool}}

// A call is a signed POST of the Call; the answer's decision comes back,
// its unknown fields ignored.
func TestWebhookCall(t *testing.T) {
	w, _, _ := newWebhook(t, beforeTool, func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := hook.Verify(testSecret, r.Header.Get(hook.SignatureHeader), body, time.Now(), 0); err != nil {
			t.Errorf("signature: %v", err)
		}
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" ||
			r.Header.Get("Idempotency-Key") != testCall.Key {
			t.Errorf("%s with headers %v", r.Method, r.Header)
		}
		var got hook.Call
		if err := json.Unmarshal(body, &got); err != nil {
			t.Error(err)
		}
		if diff := cmp.Diff(testCall, got); diff != "" {
			t.Errorf("call (-want +got):\n%s", diff)
		}
		_, _ = io.WriteString(rw, `{"action":"replace","arguments":{"path":"b.txt"},"reason":"safer","audit_id":42}`)
	})
	got, err := w.Call(context.Background(), testCall)
	if err != nil {
		t.Fatal(err)
	}
	want := hook.Decision{Action: keel.HookReplace, Reason: "safer", Arguments: json.RawMessage(`{"path":"b.txt"}`)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decision (-want +got):\n%s", diff)
	}
	if !cmp.Equal(w.Spec(), beforeTool) {
		t.Errorf("Spec = %+v", w.Spec())
	}
}

// 204, an empty body and white space let the run go on.
func TestWebhookNoDecision(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
	}{{http.StatusNoContent, ""}, {http.StatusOK, ""}, {http.StatusAccepted, " \r\n"}} {
		w, _, _ := newWebhook(t, beforeTool, func(rw http.ResponseWriter, r *http.Request) {
			rw.WriteHeader(tc.status)
			_, _ = io.WriteString(rw, tc.body)
		})
		got, err := w.Call(context.Background(), testCall)
		if err != nil || !cmp.Equal(got, hook.Decision{}) {
			t.Errorf("status %d, body %q: %+v, %v; want the zero decision", tc.status, tc.body, got, err)
		}
	}
}

// Statuses: 429 and 5xx are worth another attempt, and the next attempt
// may succeed; others are not.
func TestWebhookStatus(t *testing.T) {
	var calls atomic.Int32
	keys := make(chan string, 2)
	w, _, _ := newWebhook(t, beforeTool, func(rw http.ResponseWriter, r *http.Request) {
		keys <- r.Header.Get("Idempotency-Key")
		if calls.Add(1) == 1 {
			http.Error(rw, "upstream secret-body", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(rw, `{"action":"deny","reason":"no"}`)
	})
	_, err := w.Call(context.Background(), testCall)
	wantFailure(t, err, keel.CodeHookFailed, true, "hook audit: answered status 500", "secret-body")
	got, err := w.Call(context.Background(), testCall)
	if err != nil || got.Action != keel.HookDeny {
		t.Fatalf("the retry: %+v, %v", got, err)
	}
	if k1, k2 := <-keys, <-keys; k1 != testCall.Key || k2 != testCall.Key {
		t.Errorf("idempotency keys %q, %q; want the call's key twice", k1, k2)
	}

	for status, retryable := range map[int]bool{429: true, 503: true, 408: true, 400: false, 401: false, 404: false, 409: false} {
		w, _, _ := newWebhook(t, beforeTool, func(rw http.ResponseWriter, r *http.Request) { rw.WriteHeader(status) })
		_, err := w.Call(context.Background(), testCall)
		wantFailure(t, err, keel.CodeHookFailed, retryable, "answered status")
	}
}

// A webhook that never answers is cut at the spec's timeout, or when the
// run is cancelled.
func TestWebhookHangs(t *testing.T) {
	arrived := make(chan struct{}, 1)
	spec := beforeTool
	spec.Timeout = keel.Duration(50 * time.Millisecond)
	w, _, _ := newWebhook(t, spec, hang(t, arrived))
	_, err := w.Call(context.Background(), testCall)
	wantFailure(t, err, keel.CodeHookFailed, true, "hook audit: timed out after 50ms")
	<-arrived

	spec.Timeout = keel.Duration(hook.MaxTimeout)
	w, _, _ = newWebhook(t, spec, hang(t, arrived))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	_, err = w.Call(ctx, testCall)
	wantFailure(t, err, keel.CodeCancelled, false, "hook audit: cancelled")
}

// A 10 MB answer is refused once a byte past 1 MiB is read; the rest is
// never read.
func TestWebhookHugeResponse(t *testing.T) {
	w, _, rt := newWebhook(t, beforeTool, func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(rw, `{"reason":"`+strings.Repeat("x", 10<<20)+`"}`)
	})
	_, err := w.Call(context.Background(), testCall)
	wantFailure(t, err, keel.CodeTooLarge, false, "hook audit: response over 1 MiB", "xxxx")
	if n := rt.read.Load(); n > hook.MaxResponseBytes+1 {
		t.Errorf("read %d bytes of the answer, want at most %d", n, hook.MaxResponseBytes+1)
	}
}

// A redirect is refused and never followed: the other host sees nothing.
func TestWebhookRedirect(t *testing.T) {
	var contacted atomic.Int32
	other := newServer(t, func(rw http.ResponseWriter, r *http.Request) {
		contacted.Add(1)
		_, _ = io.WriteString(rw, `{"action":"continue"}`)
	})
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		w, _, _ := newWebhook(t, beforeTool, func(rw http.ResponseWriter, r *http.Request) {
			http.Redirect(rw, r, other.URL+"/steal", status)
		})
		_, err := w.Call(context.Background(), testCall)
		wantFailure(t, err, keel.CodeHookFailed, false, "redirect refused", other.URL, "/steal")
	}
	if n := contacted.Load(); n != 0 {
		t.Errorf("the other host was contacted %d times", n)
	}
}

// Answers that are no decision are refused, not retried.
func TestWebhookBadDecision(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		point      keel.HookPoint
		code       keel.Code
		msg        string
	}{
		{"invalid JSON", `{"action":"deny",`, keel.HookBeforeTool, keel.CodeHookFailed, "hook audit: invalid JSON response"},
		{"trailing data", `{} {"action":"stop"}`, keel.HookBeforeTool, keel.CodeHookFailed, "invalid JSON response"},
		{"not an object", `"deny"`, keel.HookBeforeTool, keel.CodeHookFailed, "invalid JSON response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, _, _ := newWebhook(t, hook.Spec{Points: keel.HookPoints}, func(rw http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(rw, tc.body)
			})
			c := testCall
			c.Point = tc.point
			_, err := w.Call(context.Background(), c)
			wantFailure(t, err, tc.code, false, tc.msg, "yyyy")
		})
	}
}

// A webhook that cannot be reached is worth another attempt.
func TestWebhookUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	w, err := hook.NewWebhook(hook.WebhookConfig{URL: url + "/keel", Secret: testSecret, Spec: beforeTool})
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Call(context.Background(), testCall)
	wantFailure(t, err, keel.CodeHookFailed, true, "hook audit: connection failed", strings.TrimPrefix(url, "http://"))
}

// NewWebhook refuses what would send a run's contents in the clear, or
// unsigned, without repeating the URL or the secret.
func TestNewWebhookRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  hook.WebhookConfig
		want error
	}{
		{"plain http to another host", hook.WebhookConfig{URL: "http://hooks.example.com/keel", Secret: testSecret, Spec: beforeTool}, hook.ErrURL},
		{"not absolute", hook.WebhookConfig{URL: "hooks.example.com/keel", Secret: testSecret, Spec: beforeTool}, hook.ErrURL},
		{"other scheme", hook.WebhookConfig{URL: "ftp://localhost/keel", Secret: testSecret, Spec: beforeTool}, hook.ErrURL},
		{"credentials", hook.WebhookConfig{URL: "https://me:hunter2@hooks.example.com/", Secret: testSecret, Spec: beforeTool}, hook.ErrURLCredentials},
		{"no secret", hook.WebhookConfig{URL: "https://hooks.example.com/keel", Spec: beforeTool}, hook.ErrNoSecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := hook.NewWebhook(tc.cfg)
			if !errors.Is(err, tc.want) {
				t.Fatalf("NewWebhook = %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), "example.com") || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q repeats the URL", err)
			}
		})
	}
	if _, err := hook.NewWebhook(hook.WebhookConfig{URL: "https://hooks.example.com/", Secret: testSecret}); err == nil {
		t.Error("a spec with no points was taken")
	}
	for _, ok := range []string{"https://hooks.example.com/keel", "http://localhost:8080/", "http://127.0.0.1:9/", "http://[::1]:9/"} {
		if err := hook.CheckURL(ok); err != nil {
			t.Errorf("CheckURL(%s) = %v", ok, err)
		}
	}
}
