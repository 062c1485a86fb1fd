package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/keelrun/keel/server/store"
)

// keel codec serves a file store's codec endpoint: a reference written by
// a worker's codec decodes to the value, only with the token, and the Web
// UI's origin gets CORS. Without a token it will not listen where other
// machines reach it.
func TestCodecCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	st, err := store.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	value := strings.Repeat("a large tool result ", 1000)
	encoded, err := store.NewCodec(st, store.CodecOptions{}).Encode([]*commonpb.Payload{{
		Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"` + value + `"`)}})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(encoded[0].GetData(), []byte(value)) {
		t.Fatal("the value was not moved to the store")
	}

	code, _, stderr := call(t, "codec", "--store", "file://"+dir, "--listen", "0.0.0.0:0", "--codec-token", "")
	if code != exitUsage || !strings.Contains(stderr, "--codec-token") {
		t.Fatalf("open listener without a token: exit %d, stderr %q", code, stderr)
	}

	stdoutR, stdoutW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- dispatch(ctx, []string{"codec", "--store", "file://" + dir, "--listen", "127.0.0.1:0",
			"--codec-token", "s3cret", "--cors-origin", "http://localhost:8080"}, stdoutW, io.Discard)
		_ = stdoutW.Close()
	}()
	line, err := bufio.NewReader(stdoutR).ReadString('\n')
	if err != nil {
		t.Fatalf("keel codec printed no address: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdoutR) }()
	endpoint := strings.Fields(line)[2] // "keel codec: URL (…"

	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: encoded})
	if err != nil {
		t.Fatal(err)
	}
	decode := func(token string) (*http.Response, []byte) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/decode", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", "http://localhost:8080")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	if resp, _ := decode(""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %s, want 401", resp.Status)
	}
	resp, got := decode("s3cret")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("decode: %s %s", resp.Status, got)
	}
	var decoded commonpb.Payloads
	if err := protojson.Unmarshal(got, &decoded); err != nil {
		t.Fatal(err)
	}
	if d := decoded.GetPayloads(); len(d) != 1 || string(d[0].GetData()) != `"`+value+`"` {
		t.Errorf("decoded %q…, want the value", got[:min(len(got), 80)])
	}
	if o := resp.Header.Get("Access-Control-Allow-Origin"); o != "http://localhost:8080" {
		t.Errorf("Access-Control-Allow-Origin %q", o)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("exit %d after cancel", code)
	}
}
