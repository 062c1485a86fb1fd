package sessionlog

import (
	"testing"
	"time"
)

func TestSpanIgnoresZeroTimes(t *testing.T) {
	var s Span
	a, b := time.Unix(10, 0), time.Unix(12, 0)
	for _, at := range []time.Time{{}, a, {}, b, {}} {
		s.Add(at)
	}
	if !s.First.Equal(a) || !s.Last.Equal(b) {
		t.Errorf("span %v to %v, want %v to %v", s.First, s.Last, a, b)
	}
}
