package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzResultOf feeds resultOf what a server may answer to tools/call, as
// the SDK decodes it. It never panics, keeps isError, never copies an
// image's or audio's data into the output the model reads, and writes
// valid UTF-8 whenever the server's text was.
func FuzzResultOf(f *testing.F) {
	for _, seed := range []string{
		`{"content":[{"type":"text","text":"hello"}]}`,
		`{"content":[{"type":"text","text":"{\"a\":1}"}],"structuredContent":{"a":1}}`,
		`{"content":[{"type":"image","data":"aGVsbG8=","mimeType":"image/png"}],"isError":true}`,
		`{"content":[{"type":"resource","resource":{"uri":"file:///x","text":"t"}},{"type":"resource_link","uri":"u","name":"n"}]}`,
		`{"content":[{"type":"audio","data":"AAAA","mimeType":"audio/wav"}],"structuredContent":[1,2]}`,
		`{"content":null}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var res sdk.CallToolResult
		if json.Unmarshal(data, &res) != nil {
			return
		}
		out := resultOf(&res)
		if out.IsError != res.IsError {
			t.Fatalf("isError %v became %v", res.IsError, out.IsError)
		}
		textValid := true
		for _, c := range res.Content {
			switch c := c.(type) {
			case *sdk.ImageContent:
				if len(c.Data) >= 16 && bytes.Contains([]byte(out.Output), c.Data) {
					t.Fatal("an image's data reached the output")
				}
			case *sdk.AudioContent:
				if len(c.Data) >= 16 && bytes.Contains([]byte(out.Output), c.Data) {
					t.Fatal("audio data reached the output")
				}
			case *sdk.TextContent:
				textValid = textValid && utf8.ValidString(c.Text)
			}
		}
		if textValid && utf8.Valid(data) && !utf8.ValidString(out.Output) {
			t.Fatalf("output is not UTF-8: %q", out.Output)
		}
	})
}

// FuzzResponseLimits feeds the readers that bound what a server sends
// (lineLimit for stdio, bodyLimit for HTTP) any bytes, read in any
// chunks: what they let through never holds a line (stdio), an event
// (an event stream) or a body (JSON) longer than the limit, and once
// they refuse, they refuse for good with ErrResponseTooLarge.
func FuzzResponseLimits(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\"}\n{\"id\":1}\n"), uint8(8), uint8(3))
	f.Add([]byte("data: aaaa\n\ndata: bbbbbbbbbbbbbbbbbbbbbbbbbbbbb\n\n"), uint8(16), uint8(5))
	f.Add([]byte("data: a\r\n\r\nid: 1\r\ndata: bb\r\n\r\n"), uint8(12), uint8(1))
	f.Add(bytes.Repeat([]byte("x"), 300), uint8(100), uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, limit, chunk uint8) {
		max := int(limit) + 1
		step := int(chunk) + 1
		s := &server{cfg: ServerConfig{Name: "f", MaxResponseBytes: max}}
		for _, kind := range []string{"line", "json", "sse"} {
			var r io.Reader
			src := &chunked{data: data, step: step}
			switch kind {
			case "line":
				r = &lineLimit{r: src, max: max, s: s}
			default:
				r = newBodyLimit(io.NopCloser(src), kind == "sse", s)
			}
			got, err := io.ReadAll(r)
			if err != nil && !isTooLarge(err) {
				t.Fatalf("%s: error %v", kind, err)
			}
			if err == nil && !bytes.Equal(got, data) {
				t.Fatalf("%s: passed %q of %q without an error", kind, got, data)
			}
			if !bytes.HasPrefix(data, got) {
				t.Fatalf("%s: returned bytes that were not read", kind)
			}
			switch kind {
			case "line":
				for _, line := range bytes.Split(got, []byte("\n")) {
					if len(line) > max {
						t.Fatalf("line: a %d-byte line passed a %d-byte limit", len(line), max)
					}
				}
			case "json":
				if len(got) > max {
					t.Fatalf("json: %d bytes passed a %d-byte limit", len(got), max)
				}
			case "sse":
				if n := longestEvent(got); n > max {
					t.Fatalf("sse: a %d-byte event passed a %d-byte limit", n, max)
				}
			}
			if err != nil {
				if _, again := r.Read(make([]byte, 8)); !isTooLarge(again) {
					t.Fatalf("%s: after the refusal, Read returned %v", kind, again)
				}
			}
		}
	})
}

func isTooLarge(err error) bool {
	var e *ResponseTooLargeError
	return err != nil && errors.As(err, &e)
}

// longestEvent is the longest event in b: its bytes up to the newline of
// the empty line that ends it, that newline excluded.
func longestEvent(b []byte) int {
	longest, n, blank := 0, 0, true
	for _, c := range b {
		n++
		switch {
		case c == '\n':
			if blank {
				n = 0
			}
			blank = true
		case c != '\r':
			blank = false
		}
		longest = max(longest, n)
	}
	return longest
}

// chunked reads data step bytes at a time.
type chunked struct {
	data []byte
	step int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.step)], c.data)
	c.data = c.data[n:]
	return n, nil
}
