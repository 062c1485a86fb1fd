package bench_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel/server/bench"
)

func TestLatencies(t *testing.T) {
	var lat bench.Latencies
	for i := 100; i >= 1; i-- { // unsorted on purpose
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		name      string
		got, want time.Duration
	}{
		{"p50", lat.P50(), 50 * time.Millisecond},
		{"p99", lat.P99(), 99 * time.Millisecond},
		{"p99.5", lat.Percentile(99.5), 100 * time.Millisecond},
		{"p100", lat.Percentile(100), 100 * time.Millisecond},
		{"p0.1", lat.Percentile(0.1), time.Millisecond},
		{"p1", lat.Percentile(1), time.Millisecond},
		{"mean", lat.Mean(), 50500 * time.Microsecond},
		{"p50 of none", bench.Latencies(nil).P50(), 0},
		{"mean of none", bench.Latencies(nil).Mean(), 0},
		{"p99 of one", bench.Latencies{7}.P99(), 7},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if lat[0] != 100*time.Millisecond {
		t.Error("Percentile sorted the caller's slice")
	}
}

type metrics map[string]float64

func (m metrics) ReportMetric(n float64, unit string) { m[unit] = n }

func TestLatenciesReport(t *testing.T) {
	got := metrics{}
	bench.Latencies{time.Millisecond, 3 * time.Millisecond}.Report(got, "delta")
	bench.Latencies{500 * time.Microsecond}.Report(got, "")
	bench.Latencies{}.Report(got, "none")
	want := metrics{"delta-p50-ms": 1, "delta-p99-ms": 3, "p50-ms": 0.5, "p99-ms": 0.5}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}
