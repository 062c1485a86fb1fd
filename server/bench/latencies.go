package bench

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Latencies are measured durations in the order they were measured.
type Latencies []time.Duration

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100), or 0
// when there are no samples.
func (l Latencies) Percentile(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	sorted := slices.Clone(l)
	slices.Sort(sorted)
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// P50 is the median.
func (l Latencies) P50() time.Duration { return l.Percentile(50) }

// P99 is the 99th percentile.
func (l Latencies) P99() time.Duration { return l.Percentile(99) }

// Mean is the average, or 0 when there are no samples.
func (l Latencies) Mean() time.Duration {
	if len(l) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range l {
		sum += d
	}
	return sum / time.Duration(len(l))
}

// String summarizes the samples: count, p50, p99 and mean.
func (l Latencies) String() string {
	return fmt.Sprintf("n=%d p50=%v p99=%v mean=%v", len(l), l.P50(), l.P99(), l.Mean())
}

// A MetricReporter takes benchmark metrics; *testing.B is one.
type MetricReporter interface {
	ReportMetric(n float64, unit string)
}

// Report adds the p50 and p99 as metrics in milliseconds, named
// "<name>-p50-ms" and "<name>-p99-ms" (just "p50-ms" and "p99-ms" if name
// is empty). It reports nothing without samples.
func (l Latencies) Report(r MetricReporter, name string) {
	if len(l) == 0 {
		return
	}
	if name != "" {
		name += "-"
	}
	r.ReportMetric(Millis(l.P50()), name+"p50-ms")
	r.ReportMetric(Millis(l.P99()), name+"p99-ms")
}

// Millis is d in milliseconds, the unit benchmark metrics use.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
