package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/gateway"
	"github.com/keelrun/keel/server/internal/keeltest"
	keelstack "github.com/keelrun/keel/server/internal/stack"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

// pixelPNG is a real PNG: one blue pixel.
func pixelPNG(t testing.TB) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.RGBA{B: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// testPDF is what keel takes as a PDF: it starts with "%PDF-".
var testPDF = []byte("%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n")

// upload posts body to /v1/attachments as contentType ("" sends none)
// with key; body may be a []byte (its length sent) or an io.Reader (sent
// chunked, its length unknown).
func (s *stack) upload(t testing.TB, key, contentType, query string, body any) reply {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case []byte:
		rd = bytes.NewReader(b)
	case io.Reader:
		rd = struct{ io.Reader }{b} // hides the length
	}
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, s.srv.URL+"/v1/attachments"+query, rd)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if key != "" {
		req.Header.Set("Authorization", bearer(key))
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	if err := json.Unmarshal(raw, &out.body); err != nil {
		t.Fatalf("upload: the answer is not a JSON object: %v\n%s", err, raw)
	}
	return out
}

// attachmentOf decodes an upload's answer.
func attachmentOf(t testing.TB, r reply) keel.Attachment {
	t.Helper()
	var a keel.Attachment
	if err := json.Unmarshal(r.raw, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// validRef is a well-formed reference to nothing stored: the session
// takes it (the worker finds out when it reads it).
func validRef() keel.Attachment {
	return keel.Attachment{Kind: keel.AttachmentImage, MediaType: "image/png", Name: "x.png",
		Key: "sha256:" + strings.Repeat("ab", 32), Size: 80, Bytes: 70}
}

// POST /v1/attachments refuses what keel does not take before it stores
// anything: a media type it does not attach or none (415), content that
// is not what it is declared as, or empty, or a bad name (400), an image
// past 5 MiB (413: at once when Content-Length says so, else once the
// limit is read), a body past 10 MiB (413). A gateway without a content
// store says so (501). Keys: a read-only key may not upload (403); a key
// limited to a session prefix may (an upload names no session). Runs and
// steering refuse references that are not well formed, and more than 8,
// with 400 before anything is sent.
func TestAttachmentRefusals(t *testing.T) {
	const (
		full = "attach-full-0123456789"
		read = "attach-read-0123456789"
		team = "attach-team-0123456789"
	)
	s := startGateway(t, gateway.Options{Keys: []gateway.APIKey{{Key: full}, {Key: read, Scope: gateway.ScopeRead},
		{Key: team, Prefix: "attach-team-"}}})
	pixel := pixelPNG(t)
	jpegHead := []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01")
	for _, c := range []struct {
		name, key, contentType, query string
		body                          any
		status                        int
		code, message                 string
	}{
		{"no store", full, "image/png", "?name=pixel.png", pixel, http.StatusNotImplemented, gateway.CodeNoContentStore, "no content store"},
		{"prefixed key", team, "image/png", "", pixel, http.StatusNotImplemented, gateway.CodeNoContentStore, ""},
		{"parameters ignored", full, "image/png; q=1", "", pixel, http.StatusNotImplemented, gateway.CodeNoContentStore, ""},
		{"read-only key", read, "image/png", "", pixel, http.StatusForbidden, gateway.CodeForbidden, "only read"},
		{"no key", "", "image/png", "", pixel, http.StatusUnauthorized, gateway.CodeUnauthorized, ""},
		{"text", full, "text/plain", "", []byte("hello"), http.StatusUnsupportedMediaType, gateway.CodeUnsupportedMediaType, `"text/plain" is not a media type keel attaches`},
		{"JSON", full, "application/json", "", []byte(`{}`), http.StatusUnsupportedMediaType, gateway.CodeUnsupportedMediaType, ""},
		{"no type", full, "", "", pixel, http.StatusUnsupportedMediaType, gateway.CodeUnsupportedMediaType, "one Content-Type"},
		{"not a type", full, "image/", "", pixel, http.StatusUnsupportedMediaType, gateway.CodeUnsupportedMediaType, "not a media type"},
		{"JPEG as PNG", full, "image/png", "", jpegHead, http.StatusBadRequest, "invalid_input", "the content is not image/png"},
		{"PNG as PDF", full, "application/pdf", "", pixel, http.StatusBadRequest, "invalid_input", "the content is not application/pdf"},
		{"empty", full, "image/png", "", []byte{}, http.StatusBadRequest, "invalid_input", "the content is not image/png"},
		{"bad name", full, "image/png", "?name=a%0Ab.png", pixel, http.StatusBadRequest, "invalid_input", "name: at most 256 bytes of printable text"},
		{"long name", full, "image/png", "?name=" + strings.Repeat("n", keel.MaxAttachmentName+1), pixel, http.StatusBadRequest, "invalid_input", "name"},
		{"image too large", full, "image/png", "", append(bytes.Clone(pixel), make([]byte, keel.MaxImageBytes)...),
			http.StatusRequestEntityTooLarge, "too_large", "bytes; the limit is 5242880"},
		{"image too large, chunked", full, "image/png", "", io.MultiReader(bytes.NewReader(pixel), bytes.NewReader(make([]byte, keel.MaxImageBytes))),
			http.StatusRequestEntityTooLarge, "too_large", "over 5242880 bytes"},
		{"PDF too large, chunked", full, "application/pdf", "", io.MultiReader(bytes.NewReader(testPDF), bytes.NewReader(make([]byte, keel.MaxDocumentBytes))),
			http.StatusRequestEntityTooLarge, "too_large", "over 10485760 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := s.upload(t, c.key, c.contentType, c.query, c.body)
			if r.status != c.status || r.code() != c.code || !strings.Contains(r.body["message"].(string), c.message) {
				t.Errorf("%d %s, want %d %s with %q", r.status, r.raw, c.status, c.code, c.message)
			}
		})
	}

	m := model(t, `{"turns":[{"text":["hi"]}]}`)
	bad := validRef()
	bad.Key = "photo.png"
	tooMany := make([]keel.Attachment, keel.MaxAttachments+1)
	for i := range tooMany {
		tooMany[i] = validRef()
	}
	as := func(key string) *stack { c := *s; c.key = key; return &c }
	for _, c := range []struct {
		name, path string
		body       map[string]any
		message    string
	}{
		{"run, not a reference", "/runs", map[string]any{"prompt": "hi", "model": m, "attachments": []keel.Attachment{bad}}, "not a reference to a stored attachment"},
		{"run, too many", "/runs", map[string]any{"prompt": "hi", "model": m, "attachments": tooMany}, "at most 8, not 9"},
		{"run, kind", "/runs", map[string]any{"prompt": "hi", "model": m, "attachments": []map[string]any{
			{"kind": "document", "media_type": "image/png", "key": validRef().Key, "size": 80, "bytes": 70}}}, "a image/png is of kind image"},
		{"run, bytes", "/runs", map[string]any{"prompt": "hi", "model": m, "attachments": []map[string]any{
			{"kind": "image", "media_type": "image/png", "key": validRef().Key, "size": 80, "bytes": 70, "data": "AAAA"}}}, "unknown field"},
		{"steer, not a reference", "/steer", map[string]any{"text": "more", "attachments": []keel.Attachment{bad}}, "not a reference"},
		{"steer, too many", "/steer", map[string]any{"text": "more", "attachments": tooMany}, "at most 8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := as(full).call(t, http.MethodPost, "/v1/sessions/attach-refused"+c.path, c.body).must(t, http.StatusBadRequest)
			if r.code() != "invalid_input" || !strings.Contains(r.body["message"].(string), c.message) {
				t.Errorf("%s, want invalid_input with %q", r.raw, c.message)
			}
		})
	}
	// Nothing was sent: the session was never made.
	as(full).call(t, http.MethodGet, "/v1/sessions/attach-refused", nil).must(t, http.StatusNotFound)
}

// attachStack is a gateway as keel dev builds it (package stack) on a
// Temporal server of its own, whose worker and gateway share a content
// store: the shared worker of the package's other tests has none, and
// would fail every turn that reads an attachment. It returns the stack
// served over HTTP with its API key, and its script book.
func attachStack(t *testing.T, opts gateway.Options) (*stack, *keeltest.ScriptBook, *keelstack.Stack) {
	t.Helper()
	srv := keeltest.StartServer(t, devserver.Config{})
	tools, err := tool.Builtins(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	book := &keeltest.ScriptBook{}
	if opts.Logger == nil {
		opts.Logger = errorLogger(t)
	}
	st, err := keelstack.Build(context.Background(), keelstack.Config{
		Server:  srv,
		Store:   keelstack.StoreConfig{Codec: keeltest.Codec(t, srv)},
		Worker:  &worker.Options{Models: book, Tools: tools, StopTimeout: time.Second},
		Gateway: &opts,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Stop() })
	hs := httptest.NewServer(st.Gateway)
	s := &stack{gw: st.Gateway, srv: hs}
	if len(opts.APIKeys) > 0 {
		s.key = opts.APIKeys[0]
	}
	t.Cleanup(s.stop)
	return s, book, st
}

// Through a gateway whose client writes to the workers' content store:
// an upload answers 201 with the reference (kind, media type, name, a
// sha256 key, sizes), the same bytes the same key; a run carrying two
// completes (the worker read them back for the model) and the session's
// history holds both references, never the bytes; steering carries one
// to an active run.
func TestAttachmentsThroughGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server of its own")
	}
	const key = "attach-through-0123456789"
	s, book, st := attachStack(t, gateway.Options{APIKeys: []string{key}})
	ctx := testCtx(t)
	pixel := pixelPNG(t)

	img := s.upload(t, key, "image/png", "?name=pixel.png", pixel).must(t, http.StatusCreated)
	a := attachmentOf(t, img)
	if a.Kind != keel.AttachmentImage || a.MediaType != "image/png" || a.Name != "pixel.png" || a.Bytes != int64(len(pixel)) ||
		a.Size <= 0 || !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(a.Key) {
		t.Fatalf("upload answered %s", img.raw)
	}
	if _, ok := img.body["data"]; ok || img.header.Get("Content-Type") != "application/json" {
		t.Fatalf("upload answered %s (%s)", img.raw, img.header.Get("Content-Type"))
	}
	again := attachmentOf(t, s.upload(t, key, "image/png", "", pixel).must(t, http.StatusCreated))
	if again.Key != a.Key || again.Name != "" {
		t.Errorf("the same bytes again: %+v, want key %s and no name", again, a.Key)
	}
	doc := attachmentOf(t, s.upload(t, key, "application/pdf", "?name=brief.pdf", bytes.NewReader(testPDF)).must(t, http.StatusCreated))
	if doc.Kind != keel.AttachmentDocument || doc.Bytes != int64(len(testPDF)) {
		t.Fatalf("PDF upload: %+v", doc)
	}

	m := book.Add(t, "attach-answer", `{"repeat":true,"turns":[{"text":["Seen."]}]}`)
	run := s.send(t, "attach-gw", map[string]any{"prompt": "What are these?", "model": m, "attachments": []keel.Attachment{a, doc}})
	out, err := st.Client.Session("attach-gw").Run(run.Number).Outcome(ctx)
	if err != nil || out.Status != keel.StatusCompleted {
		t.Fatalf("the run: %+v, %v", out, err)
	}
	h := s.call(t, http.MethodGet, "/v1/sessions/attach-gw/history", nil).must(t, http.StatusOK)
	var page struct {
		Messages []struct {
			Role        string            `json:"role"`
			Content     string            `json:"content"`
			Attachments []json.RawMessage `json:"attachments"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(h.raw, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 2 || len(page.Messages[0].Attachments) != 2 {
		t.Fatalf("history: %s", h.raw)
	}
	for i, want := range []keel.Attachment{a, doc} {
		var got keel.Attachment
		if err := json.Unmarshal(page.Messages[0].Attachments[i], &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("history's attachment %d: %s, want %+v", i, page.Messages[0].Attachments[i], want)
		}
		if bytes.Contains(page.Messages[0].Attachments[i], []byte(`"data"`)) {
			t.Errorf("history carries bytes: %s", page.Messages[0].Attachments[i])
		}
	}

	sleepy := book.Add(t, "attach-sleep", `{"turns":[{"tool_calls":[{"id":"z1","name":"sleep","arguments":{"seconds":3600}}]},{"text":["Woke."]}]}`)
	s.send(t, "attach-steer", map[string]any{"prompt": "Sleep.", "model": sleepy, "tools": []string{"sleep"}})
	r := s.call(t, http.MethodPost, "/v1/sessions/attach-steer/steer", map[string]any{"text": "And this?", "attachments": []keel.Attachment{a}}).must(t, http.StatusOK)
	if r.body["steering_id"] == "" {
		t.Fatalf("steer: %s", r.raw)
	}
	s.call(t, http.MethodPost, "/v1/sessions/attach-steer/cancel", nil).must(t, http.StatusAccepted)
}
