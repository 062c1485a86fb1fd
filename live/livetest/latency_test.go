package livetest

import (
	"testing"
	"time"
)

func TestLatencyPercentile(t *testing.T) {
	var l Latency
	if got := l.Percentile(50); got != 0 {
		t.Errorf("Percentile without samples = %v, want 0", got)
	}
	// 100 samples, 1 ms … 100 ms, added out of order.
	for i := 100; i >= 1; i-- {
		l.Add(time.Duration(i) * time.Millisecond)
	}
	for _, tt := range []struct {
		p    float64
		want time.Duration
	}{
		{1, time.Millisecond},
		{50, 50 * time.Millisecond},
		{99, 99 * time.Millisecond},
		{99.5, 100 * time.Millisecond},
		{100, 100 * time.Millisecond},
	} {
		if got := l.Percentile(tt.p); got != tt.want {
			t.Errorf("Percentile(%v) = %v, want %v", tt.p, got, tt.want)
		}
	}
	l.Add(time.Second) // adding after a sort keeps working
	if got := l.Percentile(100); got != time.Second {
		t.Errorf("Percentile(100) after Add = %v, want 1s", got)
	}
	if l.Count() != 101 {
		t.Errorf("Count() = %d, want 101", l.Count())
	}
	l.Reset()
	if l.Count() != 0 {
		t.Errorf("Count() after Reset = %d, want 0", l.Count())
	}
}
