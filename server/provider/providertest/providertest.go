// Package providertest serves recorded provider wire traffic over httptest,
// for tests of the providers and of the layers above them: a Server that
// records what it is asked, handlers that play testdata files back, and
// checks that every HTTP provider must pass. Only tests import it.
//
// An SSE fixture is a file of events, each ended by a blank line. An event
// that is the single line "!cut" drops the connection at that point, as a
// crashed server or a broken proxy would.
package providertest

import (
	"context"
	"errors"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
)

// Request is what a Server saw of one request.
type Request struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
	// Arrived is when the request reached the server.
	Arrived time.Time
}

// Server is an httptest server that records every request and answers the
// n-th one with the n-th handler; the last handler answers all the rest.
type Server struct {
	*httptest.Server
	handlers []http.HandlerFunc
	mu       sync.Mutex
	requests []Request
}

// NewServer starts a Server playing handlers, closed when t ends.
func NewServer(t testing.TB, handlers ...http.HandlerFunc) *Server {
	t.Helper()
	if len(handlers) == 0 {
		t.Fatal("providertest.NewServer: no handlers")
	}
	s := &Server{handlers: handlers}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, Request{
		Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: body, Arrived: arrived,
	})
	s.mu.Unlock()
	s.handlers[min(n, len(s.handlers)-1)](w, r)
}

// Requests returns the requests so far, in the order they arrived.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Count is the number of requests so far.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Last returns the latest request, or the zero Request if none came.
func (s *Server) Last() Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		return Request{}
	}
	return s.requests[len(s.requests)-1]
}

// Fixture reads the file at path, failing the test if it cannot.
func Fixture(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// SSE streams the SSE fixture at path.
func SSE(t testing.TB, path string) http.HandlerFunc {
	t.Helper()
	return SSEEvents(strings.SplitAfter(string(Fixture(t, path)), "\n\n")...)
}

// SSEEvents streams events as an event stream, flushing after each one.
// An event "!cut" drops the connection instead.
func SSEEvents(events ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, ev := range events {
			if strings.TrimSpace(ev) == "!cut" {
				panic(http.ErrAbortHandler)
			}
			_, _ = io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	}
}

// Error answers with status, the given header and the file at path as the
// body (none if path is ""). The body is JSON unless header says otherwise.
func Error(t testing.TB, status int, header http.Header, path string) http.HandlerFunc {
	t.Helper()
	var body []byte
	if path != "" {
		body = Fixture(t, path)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header()[k] = v
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}
}

// Collect drains a stream into its chunks and its error. A stream that
// yields anything after its error fails the test.
func Collect(t testing.TB, seq iter.Seq2[provider.Chunk, error]) ([]provider.Chunk, error) {
	t.Helper()
	var chunks []provider.Chunk
	var failure error
	for c, err := range seq {
		if failure != nil {
			t.Fatalf("stream yielded %+v, %v after its error %v", c, err, failure)
		}
		if err != nil {
			failure = err
			continue
		}
		chunks = append(chunks, c)
	}
	return chunks, failure
}

// Assemble folds chunks into an Assembler.
func Assemble(chunks []provider.Chunk) *provider.Assembler {
	var a provider.Assembler
	for _, c := range chunks {
		a.Add(c)
	}
	return &a
}

// CloseRecorder is a transport over http.DefaultTransport that notes
// whether a response body has been closed.
type CloseRecorder struct {
	closed atomic.Bool
}

// RoundTrip makes the request and wraps the response body.
func (c *CloseRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	res.Body = &recordedBody{ReadCloser: res.Body, closed: &c.closed}
	return res, nil
}

// Closed reports whether a response body has been closed.
func (c *CloseRecorder) Closed() bool { return c.closed.Load() }

type recordedBody struct {
	io.ReadCloser
	closed *atomic.Bool
}

func (b *recordedBody) Close() error {
	b.closed.Store(true)
	return b.ReadCloser.Close()
}

// Subject is an HTTP provider under test, with what the checks below need
// to know about it. The checks name fixtures by file name; the files are in
// the testdata directory of the package under test.
type Subject struct {
	// Name is the provider name its errors carry.
	Name string
	// New makes the provider for a server at baseURL, over client unless
	// client is nil.
	New func(baseURL string, client *http.Client) (provider.Provider, error)
	// Request is a valid request, sent by the checks.
	Request provider.Request
	// FirstEvent is one SSE event, with its closing blank line, that the
	// provider reads as the text chunk "first".
	FirstEvent string
}

// Provider makes the provider for a server at baseURL, failing the test
// if it cannot.
func (s Subject) Provider(t testing.TB, baseURL string) provider.Provider {
	t.Helper()
	p, err := s.New(baseURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// stream starts a server that answers with h and collects the stream of
// the subject's Request from it.
func (s Subject) stream(t *testing.T, h http.HandlerFunc) (*Server, []provider.Chunk, error) {
	t.Helper()
	srv := NewServer(t, h)
	chunks, err := Collect(t, s.Provider(t, srv.URL).Stream(context.Background(), s.Request))
	return srv, chunks, err
}

func testdata(name string) string { return filepath.Join("testdata", name) }

// Stream is a fixture that must stream without error.
type Stream struct {
	Fixture string
	// Chunks, when set, is the exact chunk sequence.
	Chunks []provider.Chunk
	// Response, when set, is the assembled response.
	Response *provider.Response
	// Malformed says assembling must fail with a *provider.MalformedError.
	Malformed bool
}

// CheckStreams plays each fixture as one response and checks the chunks
// and what they assemble to, and that one request was made.
func CheckStreams(t *testing.T, s Subject, cases []Stream) {
	for _, tt := range cases {
		t.Run(tt.Fixture, func(t *testing.T) {
			srv, chunks, err := s.stream(t, SSE(t, testdata(tt.Fixture)))
			if err != nil {
				t.Fatalf("stream error: %v", err)
			}
			if tt.Chunks != nil {
				if diff := cmp.Diff(tt.Chunks, chunks); diff != "" {
					t.Errorf("chunks (-want +got):\n%s", diff)
				}
			}
			resp, err := Assemble(chunks).Response()
			var mal *provider.MalformedError
			if tt.Malformed {
				if !errors.As(err, &mal) {
					t.Fatalf("Response() error = %v, want *provider.MalformedError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Response() error = %v", err)
			}
			if tt.Response != nil {
				if diff := cmp.Diff(*tt.Response, resp); diff != "" {
					t.Errorf("response (-want +got):\n%s", diff)
				}
			}
			if n := srv.Count(); n != 1 {
				t.Errorf("server saw %d requests, want 1", n)
			}
		})
	}
}

// StreamFailure is a fixture whose stream must end in a *keel.ProviderError.
type StreamFailure struct {
	Fixture   string
	Kind      keel.ProviderErrorKind
	Status    int
	Retryable bool
	// Message is a part of the error message, which is never empty.
	Message string
	// Partial is the text streamed before the error.
	Partial string
}

// CheckStreamFailures plays each fixture and checks the classified error
// and the text that came before it.
func CheckStreamFailures(t *testing.T, s Subject, cases []StreamFailure) {
	for _, tt := range cases {
		t.Run(tt.Fixture, func(t *testing.T) {
			_, chunks, err := s.stream(t, SSE(t, testdata(tt.Fixture)))
			var pe *keel.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("stream error = %T %v, want *keel.ProviderError", err, err)
			}
			got := keel.ProviderError{Provider: pe.Provider, Kind: pe.Kind, Status: pe.Status, Retryable: pe.Retryable}
			want := keel.ProviderError{Provider: s.Name, Kind: tt.Kind, Status: tt.Status, Retryable: tt.Retryable}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if pe.Message == "" || !strings.Contains(pe.Message, tt.Message) {
				t.Errorf("message = %q, want it to contain %q", pe.Message, tt.Message)
			}
			if got := Assemble(chunks).Text(); got != tt.Partial {
				t.Errorf("partial text = %q, want %q", got, tt.Partial)
			}
		})
	}
}

// HTTPError is an error answer and how the provider must classify it.
type HTTPError struct {
	Name   string
	Status int
	Header http.Header
	// Fixture is the body; "" sends none.
	Fixture   string
	Kind      keel.ProviderErrorKind
	Retryable bool
	// MinWait and MaxWait bound the RetryAfter hint; both zero means none.
	MinWait, MaxWait time.Duration
	// Message is a part of the error message.
	Message string
}

// CheckHTTPErrors answers the request with each error and checks the
// *keel.ProviderError, and that the provider did not retry on its own.
func CheckHTTPErrors(t *testing.T, s Subject, cases []HTTPError) {
	for _, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			body := ""
			if tt.Fixture != "" {
				body = testdata(tt.Fixture)
			}
			srv, chunks, err := s.stream(t, Error(t, tt.Status, tt.Header, body))
			if len(chunks) != 0 {
				t.Errorf("got chunks %+v before the error", chunks)
			}
			var pe *keel.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("error = %T %v, want *keel.ProviderError", err, err)
			}
			got := [4]any{pe.Provider, pe.Kind, pe.Status, pe.Retryable}
			if diff := cmp.Diff([4]any{s.Name, tt.Kind, tt.Status, tt.Retryable}, got); diff != "" {
				t.Errorf("provider, kind, status, retryable (-want +got):\n%s", diff)
			}
			if wait := pe.RetryAfter.Std(); wait < tt.MinWait || wait > tt.MaxWait {
				t.Errorf("RetryAfter = %v, want in [%v, %v]", wait, tt.MinWait, tt.MaxWait)
			}
			if !strings.Contains(pe.Message, tt.Message) {
				t.Errorf("message %q does not contain %q", pe.Message, tt.Message)
			}
			// SDK retries are off: one physical request, whatever the status.
			if n := srv.Count(); n != 1 {
				t.Errorf("server saw %d requests, want exactly 1", n)
			}
		})
	}
}

// BadRequest is a request the provider cannot build.
type BadRequest struct {
	Name    string
	Request provider.Request
	Kind    keel.ProviderErrorKind
}

// CheckBadRequests checks that each request fails with a permanent error
// of its kind before anything is sent.
func CheckBadRequests(t *testing.T, s Subject, cases []BadRequest) {
	srv := NewServer(t, SSEEvents())
	p := s.Provider(t, srv.URL)
	for _, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			_, err := Collect(t, p.Stream(context.Background(), tt.Request))
			var pe *keel.ProviderError
			if !errors.As(err, &pe) || pe.Kind != tt.Kind || pe.Retryable {
				t.Fatalf("error = %v, want permanent %s", err, tt.Kind)
			}
		})
	}
	if n := srv.Count(); n != 0 {
		t.Errorf("server saw %d requests for requests that cannot be built", n)
	}
}

// CheckConnectionRefused checks that a server that is not there is a
// retryable connection error.
func CheckConnectionRefused(t *testing.T, s Subject) {
	srv := NewServer(t, SSEEvents())
	url := srv.URL
	srv.Close()
	_, err := Collect(t, s.Provider(t, url).Stream(context.Background(), s.Request))
	var pe *keel.ProviderError
	if !errors.As(err, &pe) || pe.Kind != keel.ProviderConnection || !pe.Retryable {
		t.Fatalf("error = %v, want retryable connection ProviderError", err)
	}
}

// CheckEarlyStopClosesBody checks that a consumer that stops early (yield
// returns false) releases the connection at once.
func CheckEarlyStopClosesBody(t *testing.T, s Subject) {
	release := make(chan struct{})
	defer close(release)
	srv := NewServer(t, blockAfterFirst(s.FirstEvent, release))
	rec := &CloseRecorder{}
	p, err := s.New(srv.URL, &http.Client{Transport: rec})
	if err != nil {
		t.Fatal(err)
	}
	var got []provider.Chunk
	for c, err := range p.Stream(context.Background(), s.Request) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c)
		break
	}
	if diff := cmp.Diff([]provider.Chunk{{Text: "first"}}, got); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
	if !rec.Closed() {
		t.Error("response body still open after the consumer stopped")
	}
}

// CheckCancelMidStream checks that cancelling the caller's context ends
// the stream with the context's own error, unclassified, so the runtime
// sees a cancellation.
func CheckCancelMidStream(t *testing.T, s Subject) {
	release := make(chan struct{})
	defer close(release)
	srv := NewServer(t, blockAfterFirst(s.FirstEvent, release))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var chunks []provider.Chunk
	var failure error
	for c, err := range s.Provider(t, srv.URL).Stream(ctx, s.Request) {
		if err != nil {
			failure = err
			continue
		}
		chunks = append(chunks, c)
		cancel() // after the first chunk
	}
	if !errors.Is(failure, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", failure)
	}
	var pe *keel.ProviderError
	if errors.As(failure, &pe) {
		t.Errorf("cancellation was classified as %v", pe)
	}
	if len(chunks) != 1 {
		t.Errorf("got %d chunks, want 1", len(chunks))
	}
}

// blockAfterFirst sends first and then holds the stream open until the
// client goes away or release is closed.
func blockAfterFirst(first string, release <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, first)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
}

// UsageChunk is the chunk that reports u.
func UsageChunk(u keel.Usage) provider.Chunk { return provider.Chunk{Usage: &u} }

// GenerationChunk is the chunk that reports a generation-window count.
func GenerationChunk(kind string, n int64) provider.Chunk {
	return provider.Chunk{Generation: &keel.GenerationTokens{Kind: kind, N: n}}
}

// ToolCallChunk is the chunk that carries one tool call fragment.
func ToolCallChunk(index int, id, name, args string) provider.Chunk {
	return provider.Chunk{ToolCall: &provider.ToolCallDelta{Index: index, ID: id, Name: name, Arguments: args}}
}
