package openai

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/providertest"
)

// BenchmarkRequestOverhead measures what one model turn costs keel on each
// API: building the request, sending it to an httptest server, reading the
// recorded stream back and assembling the response. Each pair of
// sub-benchmarks replays the same content: "text" is the recorded
// three-delta answer, "long" the same recording with 500 text deltas. The
// server writes each stream in one go, so the figures are mostly the
// client's.
func BenchmarkRequestOverhead(b *testing.B) {
	const long = 500
	streams := []struct {
		name    string
		cfg     Config
		fixture string
		events  func(events []string, n int) []string
	}{
		{"chat", Config{}, "testdata/text.sse", chatEvents},
		{"responses", Config{API: APIResponses}, "testdata/responses_text.sse", responsesEvents},
	}
	for _, size := range []struct {
		name string
		n    int
	}{{"text", 0}, {"long", long}} {
		for _, s := range streams {
			b.Run(size.name+"/"+s.name, func(b *testing.B) {
				events := strings.SplitAfter(string(providertest.Fixture(b, s.fixture)), "\n\n")
				if size.n > 0 {
					events = s.events(events, size.n)
				}
				body := []byte(strings.Join(events, ""))
				srv := providertest.NewServer(b, func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = w.Write(body)
				})
				s.cfg.BaseURL, s.cfg.APIKey = srv.URL+"/v1", testKey
				p, err := New(s.cfg)
				if err != nil {
					b.Fatal(err)
				}
				req := weatherTranscript()
				want := "Hello, world!"
				if size.n > 0 {
					want = strings.Repeat(benchWord, size.n)
				}
				b.ReportAllocs()
				for b.Loop() {
					var asm provider.Assembler
					for c, err := range p.Stream(context.Background(), req) {
						if err != nil {
							b.Fatal(err)
						}
						asm.Add(c)
					}
					if resp, err := asm.Response(); err != nil || resp.Text != want {
						b.Fatalf("response %.40q, %v; want %.40q", resp.Text, err, want)
					}
				}
			})
		}
	}
}

// benchWord is the text of each delta of a long stream.
const benchWord = " token"

// chatEvents turns text.sse into a stream of n deltas: its role chunk, n
// copies of its first content chunk, then its finish, usage and [DONE].
func chatEvents(events []string, n int) []string {
	out := append([]string(nil), events[0])
	delta := strings.Replace(events[1], `"content":"Hello"`, `"content":"`+benchWord+`"`, 1)
	for range n {
		out = append(out, delta)
	}
	return append(out, events[4:]...)
}

// responsesEvents turns responses_text.sse into a stream of n deltas: its
// four opening events, n copies of its first delta, then its closing
// events, which repeat the whole text as the API's do.
func responsesEvents(events []string, n int) []string {
	out := append([]string(nil), events[:4]...)
	delta := strings.Replace(events[4], `"delta":"Hello"`, `"delta":"`+benchWord+`"`, 1)
	for range n {
		out = append(out, delta)
	}
	text, _ := json.Marshal(strings.Repeat(benchWord, n))
	for _, ev := range events[7:] {
		out = append(out, strings.ReplaceAll(ev, `"Hello, world!"`, string(text)))
	}
	return out
}
