package gateway_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/gateway"
)

// The page's reducer (web/transcript.js, as the gateway serves it) in a
// real browser reduces every stream of transcript/testdata to what the
// Go reducer's expectations file beside it says: what each event did and
// the view. Go and JavaScript are checked against the same files.
func TestPageReducerReplaysRecordedStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	paths, err := filepath.Glob(filepath.Join("..", "..", "transcript", "testdata", "*.jsonl"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recorded streams: %v", err)
	}
	// Among them a fork's log, whose session.forked and session.rewound
	// belong to no run: both reducers keep them as the session's
	// (docs/contract.md §19).
	// And money: costs, unpriced requests and budget warnings, kept by
	// both the same way, a wrong shape undecodable in both
	// (docs/contract.md §20).
	// And rate limits: model.waiting on a step until the wait is over,
	// its wait read as Go reads durations (docs/contract.md §20.5).
	// And hosted tools: hosted_tool.activity on its step as output of its
	// attempt, URLs bounded, and web searches counted in usage.
	for _, name := range []string{"lineage", "money", "rate_limit", "hosted"} {
		if !slices.Contains(paths, filepath.Join("..", "..", "transcript", "testdata", name+".jsonl")) {
			t.Fatalf("no %s stream among %v", name, paths)
		}
	}
	b := newBrowser(t)
	s := startGateway(t, gateway.Options{})
	b.do("load the page", chromedp.Navigate(s.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#open-form")))
	// The page formats nanos as keel.FormatNanos does, exactly: integer
	// arithmetic, where a division in floats would be off.
	t.Run("formatNanos", func(t *testing.T) {
		for _, n := range []int64{0, 5, 12_300_000, 3_300_000_000, 4_000_000_000, -1_500_000_000, 123_456_789,
			9_007_199_254_740_991, 8_999_999_999_999_999, 1_000_000_000_000_000} {
			arg, _ := json.Marshal(n)
			if got, want := eval[string](b, `keelTranscript.formatNanos(`+string(arg)+`)`), keel.FormatNanos(n); got != want {
				t.Errorf("formatNanos(%d) = %q, want %q", n, got, want)
			}
		}
		if got := eval[string](b, `keelTranscript.formatNanos(1.5) + "|" + keelTranscript.formatNanos("12")`); got != "|" {
			t.Errorf("formatNanos of what is not an integer: %q", got)
		}
	})
	// The page reads a keel.Duration as Go does (a model.waiting's wait,
	// docs/contract.md §20.5): a string by time.ParseDuration's rules,
	// fractions in floating point as Go computes them; a number as
	// milliseconds; anything Go refuses is refused.
	t.Run("durationNanos", func(t *testing.T) {
		for _, v := range []any{"0", "", "+0", "-0", "1s", "1.5s", "4.2s", "1m2.0009µs", "1μs", "1us", "1ns", "1.0000005ms",
			"2562047h47m16.854775807s", "2562047h47m16.854775808s", "-2562047h47m16.854775808s", "-2562047h47m16.854775809s",
			".5s", "5.s", ".s", "1", "s", "1x", "1h2m3.5s", "0.1h", "1.23456789123456789123456789s",
			"9223372036854775807ns", "9223372036854775808ns", "-9223372036854775808ns", "3.000000000000000000000000000001h",
			"1e3s", "1.5.5s", "1s1", "soon", "  1s", "1 s", "0.333333333333333333h", "99999999999999999999ns",
			"1.1111111111111111111111h", 1500.75, -3, 0.0000001, nil} {
			arg, _ := json.Marshal(v)
			want := "null"
			var d keel.Duration
			if err := json.Unmarshal(arg, &d); err == nil {
				want = strconv.FormatInt(int64(d), 10)
			}
			if got := eval[string](b, `String(keelTranscript.durationNanos(`+string(arg)+`))`); got != want {
				t.Errorf("durationNanos(%s) = %s, want %s", arg, got, want)
			}
		}
	})
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, l := range strings.Split(string(data), "\n") {
				if strings.TrimSpace(l) != "" {
					lines = append(lines, l)
				}
			}
			arg, _ := json.Marshal(lines)
			got := eval[string](b, `JSON.stringify(keelTranscript.reduce(`+string(arg)+`.map((l) => JSON.parse(l))))`)
			raw, err := os.ReadFile(strings.TrimSuffix(path, ".jsonl") + ".expect.json")
			if err != nil {
				t.Fatal(err)
			}
			var want, have any
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(got), &have); err != nil {
				t.Fatalf("the page's reducer answered %q: %v", got, err)
			}
			if !reflect.DeepEqual(want, have) {
				pretty, _ := json.MarshalIndent(have, "", "  ")
				t.Errorf("the page's reducer differs from %s.expect.json; it made:\n%s", name, pretty)
			}
		})
	}
}
