package openai

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/provider"
)

// fakeServer is an httptest server that records every request it gets.
type fakeServer struct {
	*httptest.Server
	requests atomic.Int32
	mu       sync.Mutex
	last     recordedRequest
}

type recordedRequest struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
}

func newServer(t *testing.T, handler http.HandlerFunc) *fakeServer {
	t.Helper()
	s := &fakeServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.requests.Add(1)
		s.mu.Lock()
		s.last = recordedRequest{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
		s.mu.Unlock()
		handler(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *fakeServer) lastRequest() recordedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sseFixture streams a testdata file event by event, flushing after each.
// An event consisting of the line "!cut" aborts the connection mid-body, as
// a crashed server or a dropped proxy connection would.
func sseFixture(t *testing.T, name string) http.HandlerFunc {
	data := fixture(t, name)
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, ev := range strings.SplitAfter(string(data), "\n\n") {
			if strings.TrimSpace(ev) == "!cut" {
				panic(http.ErrAbortHandler)
			}
			_, _ = io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	}
}

// errorFixture answers with status, headers and a testdata file as body.
func errorFixture(t *testing.T, status int, header http.Header, name string) http.HandlerFunc {
	var body []byte
	if name != "" {
		body = fixture(t, name)
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

func newProvider(t *testing.T, baseURL string) *Provider {
	t.Helper()
	p, err := New(Config{BaseURL: baseURL + "/v1", APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const testKey = "sk-test-SECRET-1234567890"

var simpleRequest = provider.Request{
	Model:    "gpt-test",
	Messages: []keel.Message{keel.UserMessage("Say hello")},
}

// collect drains a stream. It fails the test if anything follows an error.
func collect(t *testing.T, seq func(func(provider.Chunk, error) bool)) ([]provider.Chunk, error) {
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

func assemble(chunks []provider.Chunk) *provider.Assembler {
	var a provider.Assembler
	for _, c := range chunks {
		a.Add(c)
	}
	return &a
}

// closeRecorder wraps response bodies to see whether they get closed.
type closeRecorder struct {
	closed atomic.Bool
}

func (c *closeRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	res.Body = &recordingBody{ReadCloser: res.Body, closed: &c.closed}
	return res, nil
}

type recordingBody struct {
	io.ReadCloser
	closed *atomic.Bool
}

func (b *recordingBody) Close() error {
	b.closed.Store(true)
	return b.ReadCloser.Close()
}

// blockAfterFirst sends one text chunk and then holds the stream open until
// the client goes away.
func blockAfterFirst(release <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"first"},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
}

func contains(haystack []byte, needle string) bool { return bytes.Contains(haystack, []byte(needle)) }
