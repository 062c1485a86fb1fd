package providertest

import (
	"bytes"
	"image/png"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/keelrun/keel"
)

func get(t *testing.T, url string) (*http.Response, string, error) {
	t.Helper()
	res, err := http.Post(url, "text/plain", strings.NewReader("ping"))
	if err != nil {
		return nil, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res, string(b), err
}

// The n-th request gets the n-th handler, the last one repeating, and
// every request is recorded.
func TestServerOrderAndRecord(t *testing.T) {
	srv := NewServer(t, SSEEvents("data: 1\n\n"), Error(t, http.StatusTeapot, http.Header{"Retry-After": {"3"}}, ""))
	var statuses []int
	for range 3 {
		res, _, err := get(t, srv.URL+"/v1/x?a=b")
		if err != nil {
			t.Fatal(err)
		}
		statuses = append(statuses, res.StatusCode)
	}
	if want := []int{200, 418, 418}; !slices.Equal(statuses, want) {
		t.Errorf("statuses = %v, want %v", statuses, want)
	}
	if srv.Count() != 3 || len(srv.Requests()) != 3 {
		t.Errorf("Count() = %d, len(Requests()) = %d, want 3", srv.Count(), len(srv.Requests()))
	}
	last := srv.Last()
	if last.Method != http.MethodPost || last.Path != "/v1/x" || last.RawQuery != "a=b" ||
		string(last.Body) != "ping" || last.Header.Get("Content-Type") != "text/plain" || last.Arrived.IsZero() {
		t.Errorf("Last() = %+v", last)
	}
}

// An event "!cut" drops the connection after what came before it.
func TestSSECut(t *testing.T) {
	srv := NewServer(t, SSEEvents("data: 1\n\n", "!cut\n\n", "data: 2\n\n"))
	_, body, err := get(t, srv.URL)
	if err == nil {
		t.Fatalf("read %q without an error", body)
	}
	if body != "data: 1\n\n" {
		t.Errorf("body before the cut = %q", body)
	}
}

// The attachments are what keel takes: checked by their bytes and valid
// references.
func TestAttachments(t *testing.T) {
	for _, a := range []keel.Attachment{Attachment("image/png", "dot.png", PNG()), Attachment("application/pdf", "", []byte(PDF))} {
		if kind, err := keel.CheckAttachmentData(a.MediaType, a.Data); err != nil || kind != a.Kind {
			t.Errorf("%s: kind %q, error %v", a.MediaType, kind, err)
		}
		if err := a.Validate(); err != nil {
			t.Errorf("%s: %v", a.MediaType, err)
		}
	}
	if _, err := png.Decode(bytes.NewReader(PNG())); err != nil {
		t.Errorf("PNG does not decode: %v", err)
	}
}
