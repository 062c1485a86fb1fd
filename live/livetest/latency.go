package livetest

import (
	"math"
	"slices"
	"sync"
	"testing"
	"time"
)

// Latency collects latency samples and reports percentiles. The zero value
// is ready to use, and it is safe for concurrent use.
type Latency struct {
	mu      sync.Mutex
	samples []time.Duration
}

// Add records one sample.
func (l *Latency) Add(d time.Duration) {
	l.mu.Lock()
	l.samples = append(l.samples, d)
	l.mu.Unlock()
}

// AddSince records the time elapsed since t. Across processes on one
// machine t is a wall-clock time (such as an envelope's At) and the sample
// is as good as the clock; within a process, pass a time.Now() value to use
// the monotonic clock.
func (l *Latency) AddSince(t time.Time) { l.Add(time.Since(t)) }

// Count returns the number of samples.
func (l *Latency) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.samples)
}

// Reset forgets every sample, for example after a warm-up.
func (l *Latency) Reset() {
	l.mu.Lock()
	l.samples = l.samples[:0]
	l.mu.Unlock()
}

// Percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of the
// samples, or 0 if there are none.
func (l *Latency) Percentile(p float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.samples) == 0 {
		return 0
	}
	slices.Sort(l.samples)
	rank := int(math.Ceil(p / 100 * float64(len(l.samples))))
	return l.samples[min(max(rank, 1), len(l.samples))-1]
}

// Report adds the p50 and p99 as benchmark metrics in milliseconds, named
// "<name>-p50-ms" and "<name>-p99-ms" (just "p50-ms" and "p99-ms" if name
// is empty). It reports nothing without samples.
func (l *Latency) Report(b *testing.B, name string) {
	if l.Count() == 0 {
		return
	}
	if name != "" {
		name += "-"
	}
	b.ReportMetric(ms(l.Percentile(50)), name+"p50-ms")
	b.ReportMetric(ms(l.Percentile(99)), name+"p99-ms")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
