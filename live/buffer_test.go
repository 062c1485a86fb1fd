package live_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel/internal/livetest"
	"github.com/keelrun/keel/live"
)

func TestBuffer(t *testing.T) {
	type push struct {
		event, gap int
		miss       int // if set, a miss(n) instead of a push
	}
	pushes := func(from, to int) []push {
		var p []push
		for i := from; i <= to; i++ {
			p = append(p, push{event: i})
		}
		return p
	}
	tests := []struct {
		name   string
		limit  int
		pushes []push
		close  bool
		want   []livetest.Step
	}{{
		name:   "within the limit nothing is lost",
		limit:  4,
		pushes: pushes(1, 4),
		close:  true,
		want:   livetest.Concat(livetest.Events(1, 4), []livetest.Step{livetest.Closed()}),
	}, {
		name:   "overflow drops the oldest and reports them first",
		limit:  4,
		pushes: pushes(1, 10),
		close:  true,
		want:   livetest.Concat([]livetest.Step{livetest.Lag(6)}, livetest.Events(7, 10), []livetest.Step{livetest.Closed()}),
	}, {
		name:   "growth past the initial ring keeps order",
		limit:  3 * live.InitialRing,
		pushes: pushes(1, 3*live.InitialRing+5),
		close:  true,
		want:   livetest.Concat([]livetest.Step{livetest.Lag(5)}, livetest.Events(6, 3*live.InitialRing+5), []livetest.Step{livetest.Closed()}),
	}, {
		name:   "an upstream gap is reported where it happened",
		limit:  8,
		pushes: []push{{event: 1}, {event: 2}, {event: 5, gap: 2}, {event: 6}},
		close:  true,
		want:   []livetest.Step{{Event: 1}, {Event: 2}, livetest.Lag(2), {Event: 5}, {Event: 6}, livetest.Closed()},
	}, {
		name:  "a dropped event takes the gap in front of it along",
		limit: 2,
		// 3 follows a gap of 10; dropping 1 and 3 loses 1 + 10 + 1 events.
		pushes: []push{{event: 1}, {event: 3, gap: 10}, {event: 4}, {event: 5}},
		close:  true,
		want:   []livetest.Step{livetest.Lag(12), {Event: 4}, {Event: 5}, livetest.Closed()},
	}, {
		name:   "a miss attaches to the next event",
		limit:  8,
		pushes: []push{{event: 1}, {miss: 1}, {event: 3}},
		close:  true,
		want:   []livetest.Step{{Event: 1}, livetest.Lag(1), {Event: 3}, livetest.Closed()},
	}, {
		name:   "a trailing miss is reported before ErrClosed",
		limit:  8,
		pushes: []push{{event: 1}, {miss: 2}},
		close:  true,
		want:   []livetest.Step{{Event: 1}, livetest.Lag(2), livetest.Closed()},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := live.NewBuffer(tt.limit)
			for _, p := range tt.pushes {
				if p.miss > 0 {
					b.Miss(p.miss)
					continue
				}
				b.Push(livetest.Delta("s", p.event), p.gap)
			}
			if tt.close {
				b.Close()
			}
			got := livetest.Drain(t, b.Next, len(tt.want))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
		})
	}
}

// Each overflow episode is reported once, with its own count.
func TestBufferReportsEachEpisode(t *testing.T) {
	b := live.NewBuffer(4)
	for i := 1; i <= 6; i++ {
		b.Push(livetest.Delta("s", i), 0)
	}
	got := livetest.Drain(t, b.Next, 3) // livetest.Lag(2), 3, 4
	for i := 7; i <= 9; i++ {           // 5, 6 retained; 7, 8 fit; 9 drops 5
		b.Push(livetest.Delta("s", i), 0)
	}
	got = append(got, livetest.Drain(t, b.Next, 5)...)
	want := []livetest.Step{livetest.Lag(2), {Event: 3}, {Event: 4}, livetest.Lag(1), {Event: 6}, {Event: 7}, {Event: 8}, {Event: 9}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
}

func TestBufferAbandonDiscards(t *testing.T) {
	b := live.NewBuffer(4)
	b.Push(livetest.Delta("s", 1), 0)
	b.Abandon()
	b.Push(livetest.Delta("s", 2), 0) // ignored, and must not panic
	if _, err := b.Next(t.Context()); !errors.Is(err, live.ErrClosed) {
		t.Fatalf("Next after abandon = %v, want ErrClosed", err)
	}
}

func TestBufferNextWakesOnPushAndClose(t *testing.T) {
	b := live.NewBuffer(4)
	got := make(chan livetest.Step, 2)
	go func() {
		for range 2 {
			env, err := b.Next(t.Context())
			got <- livetest.StepOf(t, env, err)
		}
	}()
	b.Push(livetest.Delta("s", 1), 0)
	if s := <-got; s != (livetest.Step{Event: 1}) {
		t.Fatalf("first Next = %+v, want event 1", s)
	}
	b.Close()
	if s := <-got; s != livetest.Closed() {
		t.Fatalf("Next after close = %+v, want ErrClosed", s)
	}
}
