package gateway_test

import (
	"context"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/gateway"
)

// refused checks a stream request's answer: the status and code, a
// Retry-After of at least a second, retryable.
func refused(t testing.TB, r reply, status int, code string) {
	t.Helper()
	if r.status != status || r.code() != code || r.body["retryable"] != true {
		t.Fatalf("want %d %s: %d %s", status, code, r.status, r.raw)
	}
	if n, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || n < 1 {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
}

// waitStreams waits until the gateway holds n streams: the server ends a
// handler once it notices its client left.
func waitStreams(t testing.TB, gw *gateway.Gateway, n int) {
	t.Helper()
	for ctx := testCtx(t); gw.Streams() != n; runtime.Gosched() {
		if ctx.Err() != nil {
			t.Fatalf("%d streams open, want %d", gw.Streams(), n)
		}
	}
}

// One client cannot take every stream: past its API key's limit or its
// address's, a stream gets 429 too_many_streams with Retry-After, while
// other keys go on; a stream closed frees its place.
func TestStreamsPerClient(t *testing.T) {
	const keyA, keyB = "limits-key-a-0123456789", "limits-key-b-0123456789"
	s := startGateway(t, gateway.Options{APIKeys: []string{keyA, keyB}, MaxStreamsPerKey: 2, MaxStreamsPerAddr: 3})
	s.send(t, "per-client", map[string]any{"prompt": "hi", "model": model(t, `{"turns":[{"text":["hi"]}]}`)})
	open := func(key string) (*sseStream, context.CancelFunc) {
		ctx, cancel := context.WithCancel(testCtx(t))
		s.key = key
		st := s.stream(t, ctx, "per-client", "", nil)
		st.until(t, keel.TypeRunCompleted)
		return st, cancel
	}
	tryStream := func(key string) reply {
		return s.callWith(t, http.MethodGet, "/v1/sessions/per-client/events", nil,
			map[string]string{"Accept": "text/event-stream", "Authorization": bearer(key)})
	}
	a1, cancelA1 := open(keyA)
	open(keyA)
	refused(t, tryStream(keyA), http.StatusTooManyRequests, gateway.CodeTooManyStreams)
	if r := tryStream(keyA); strings.Contains(string(r.raw), keyA) {
		t.Fatalf("the refusal quotes the key: %s", r.raw)
	}
	// Another key streams, up to the address's limit of 3.
	open(keyB)
	r := tryStream(keyB)
	refused(t, r, http.StatusTooManyRequests, gateway.CodeTooManyStreams)
	if !strings.Contains(r.body["message"].(string), "address") {
		t.Fatalf("refused for the address: %s", r.raw)
	}
	// A JSON page is not a stream.
	s.key = keyA
	s.call(t, http.MethodGet, "/v1/sessions/per-client/events", nil).must(t, http.StatusOK)
	// Closing one of key A's streams lets key A stream again.
	cancelA1()
	a1.close()
	waitStreams(t, s.gw, 2)
	open(keyA)
}

// Behind a trusted reverse proxy the client address is the right-most
// X-Forwarded-For hop the proxy added; hops a client writes itself, to
// the left, are not believed, and without a trusted proxy the header is
// ignored (so a client cannot dodge its limit by writing one).
func TestTrustedProxy(t *testing.T) {
	s := startGateway(t, gateway.Options{MaxStreamsPerAddr: 1, TrustedProxies: []string{"127.0.0.0/8", "::1"}})
	s.send(t, "proxied", map[string]any{"prompt": "hi", "model": model(t, `{"turns":[{"text":["hi"]}]}`)})
	try := func(s *stack, xff string) reply {
		return s.callWith(t, http.MethodGet, "/v1/sessions/proxied/events", nil,
			map[string]string{"Accept": "text/event-stream", "X-Forwarded-For": xff})
	}
	for _, xff := range []string{"192.0.2.1", "192.0.2.2"} {
		st := s.stream(t, testCtx(t), "proxied", "", map[string]string{"X-Forwarded-For": xff})
		st.until(t, keel.TypeRunCompleted)
	}
	refused(t, try(s, "192.0.2.1"), http.StatusTooManyRequests, gateway.CodeTooManyStreams)
	// A client that writes its own hop before the proxy's is still
	// counted as the address the proxy saw.
	refused(t, try(s, "198.51.100.7, 192.0.2.1"), http.StatusTooManyRequests, gateway.CodeTooManyStreams)
	// A trusted proxy's own hop is skipped.
	refused(t, try(s, "192.0.2.1, 127.0.0.5"), http.StatusTooManyRequests, gateway.CodeTooManyStreams)

	direct := startGateway(t, gateway.Options{MaxStreamsPerAddr: 1})
	st := direct.stream(t, testCtx(t), "proxied", "", map[string]string{"X-Forwarded-For": "192.0.2.1"})
	st.until(t, keel.TypeRunCompleted)
	refused(t, try(direct, "192.0.2.99"), http.StatusTooManyRequests, gateway.CodeTooManyStreams)

	if _, err := gateway.New(nil, gateway.Options{TrustedProxies: []string{"proxy.example"}}); err == nil {
		t.Fatal("a trusted proxy that is not an address was accepted")
	}
}

// Each followed session holds one Temporal history long poll, and so does
// each AG-UI stream: past MaxFollowedSessions a stream of another session
// gets 503 overloaded with Retry-After (a stream of a followed session
// still joins its follower), an AG-UI request is refused before it sends
// anything, and a follower given back makes room.
func TestMaxFollowedSessions(t *testing.T) {
	s := startGateway(t, gateway.Options{MaxFollowedSessions: 1})
	m := model(t, `{"turns":[{"text":["hi"]}]}`)
	s.send(t, "followed-a", map[string]any{"prompt": "hi", "model": m})
	s.send(t, "followed-b", map[string]any{"prompt": "hi", "model": shared.book.Add(t, t.Name()+"-b", `{"turns":[{"text":["hi"]}]}`)})
	ctx, cancel := context.WithCancel(testCtx(t))
	a := s.stream(t, ctx, "followed-a", "", nil)
	a.until(t, keel.TypeRunCompleted)
	s.stream(t, ctx, "followed-a", "", nil).until(t, keel.TypeRunCompleted)
	if n := gateway.Followers(s.gw); n != 1 {
		t.Fatalf("%d followers for one session's two streams", n)
	}
	refused(t, s.callWith(t, http.MethodGet, "/v1/sessions/followed-b/events", nil, map[string]string{"Accept": "text/event-stream"}),
		http.StatusServiceUnavailable, gateway.CodeOverloaded)
	r := s.call(t, http.MethodPost, "/v1/ag-ui", aguiInput("followed-c", "r1", "hi", map[string]any{"model": m}))
	refused(t, r, http.StatusServiceUnavailable, gateway.CodeOverloaded)
	s.call(t, http.MethodGet, "/v1/sessions/followed-c", nil).must(t, http.StatusNotFound)

	cancel()
	waitStreams(t, s.gw, 0)
	for wait := testCtx(t); gateway.Followers(s.gw) != 0; runtime.Gosched() {
		if wait.Err() != nil {
			t.Fatalf("%d followers after the last stream closed", gateway.Followers(s.gw))
		}
	}
	s.stream(t, testCtx(t), "followed-b", "", nil).until(t, keel.TypeRunCompleted)
}

// Each route's body is bounded by what its fields can hold: a steering
// body past MaxSteerBodyBytes gets 413 before it is read whole, although
// the gateway's body limit is larger; a steering text too long for the
// run gets 413 too_large (keel.TooLarge, as the run answers) before any
// call.
func TestRouteBodyLimits(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	big := `{"text":"` + strings.Repeat("a", gateway.MaxSteerBodyBytes) + `"}`
	if len(big) >= gateway.DefaultMaxBodyBytes {
		t.Fatalf("the test body (%d) is not under the gateway's limit", len(big))
	}
	r := s.call(t, http.MethodPost, "/v1/sessions/body-limits/steer", big).must(t, http.StatusRequestEntityTooLarge)
	if r.code() != gateway.CodeBodyTooLarge {
		t.Fatalf("steer body: %s", r.raw)
	}
	long := `{"text":"` + strings.Repeat("a", 256<<10+1) + `"}`
	r = s.call(t, http.MethodPost, "/v1/sessions/body-limits/steer", long).must(t, http.StatusRequestEntityTooLarge)
	if r.code() != "too_large" {
		t.Fatalf("long steering text: %s", r.raw)
	}
	s.call(t, http.MethodPost, "/v1/sessions/body-limits/steer", `{"text":""}`).must(t, http.StatusBadRequest)
}
