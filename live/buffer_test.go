package live

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
)

// delta returns the i-th test event of a session: a text delta whose text
// is i.
func delta(sessionID string, i int) keel.Envelope {
	return paddedDelta(sessionID, i, 0)
}

// paddedDelta is delta with pad bytes of text after the index.
func paddedDelta(sessionID string, i, pad int) keel.Envelope {
	data, err := json.Marshal(keel.TextDelta{Step: 1, Text: strconv.Itoa(i) + strings.Repeat(" ", pad)})
	if err != nil {
		panic(err)
	}
	return keel.Envelope{
		Type:      keel.TypeTextDelta,
		SessionID: sessionID,
		RunID:     keel.RunID(sessionID, 1),
		At:        time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		AfterSeq:  7,
		Data:      data,
	}
}

// indexOf returns the index of a delta or paddedDelta.
func indexOf(env keel.Envelope) (int, error) {
	var d keel.TextDelta
	if err := json.Unmarshal(env.Data, &d); err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimRight(d.Text, " "))
}

// step is what one Next call returned, in a comparable form: the event's
// index, or the number of events a *LaggedError reported, or the error.
type step struct {
	Event  int
	Missed int
	Err    string
}

func stepOf(t *testing.T, env keel.Envelope, err error) step {
	t.Helper()
	var lagged *LaggedError
	switch {
	case errors.As(err, &lagged):
		return step{Missed: lagged.Missed}
	case err != nil:
		return step{Err: err.Error()}
	}
	i, perr := indexOf(env)
	if perr != nil {
		t.Fatalf("event data %q is not an index", env.Data)
	}
	return step{Event: i}
}

// drain reads n steps, failing the test if any read waits longer than the
// failure guard.
func drain(t *testing.T, next func(context.Context) (keel.Envelope, error), n int) []step {
	t.Helper()
	var got []step
	for range n {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		env, err := next(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Next: no event after 10s; got so far %v", got)
		}
		got = append(got, stepOf(t, env, err))
	}
	return got
}

func events(from, to int) []step {
	var s []step
	for i := from; i <= to; i++ {
		s = append(s, step{Event: i})
	}
	return s
}

func lag(n int) step { return step{Missed: n} }

func closed() step { return step{Err: ErrClosed.Error()} }

func concat(parts ...[]step) []step {
	var s []step
	for _, p := range parts {
		s = append(s, p...)
	}
	return s
}

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
		want   []step
	}{{
		name:   "within the limit nothing is lost",
		limit:  4,
		pushes: pushes(1, 4),
		close:  true,
		want:   concat(events(1, 4), []step{closed()}),
	}, {
		name:   "overflow drops the oldest and reports them first",
		limit:  4,
		pushes: pushes(1, 10),
		close:  true,
		want:   concat([]step{lag(6)}, events(7, 10), []step{closed()}),
	}, {
		name:   "growth past the initial ring keeps order",
		limit:  3 * initialRing,
		pushes: pushes(1, 3*initialRing+5),
		close:  true,
		want:   concat([]step{lag(5)}, events(6, 3*initialRing+5), []step{closed()}),
	}, {
		name:   "an upstream gap is reported where it happened",
		limit:  8,
		pushes: []push{{event: 1}, {event: 2}, {event: 5, gap: 2}, {event: 6}},
		close:  true,
		want:   []step{{Event: 1}, {Event: 2}, lag(2), {Event: 5}, {Event: 6}, closed()},
	}, {
		name:  "a dropped event takes the gap in front of it along",
		limit: 2,
		// 3 follows a gap of 10; dropping 1 and 3 loses 1 + 10 + 1 events.
		pushes: []push{{event: 1}, {event: 3, gap: 10}, {event: 4}, {event: 5}},
		close:  true,
		want:   []step{lag(12), {Event: 4}, {Event: 5}, closed()},
	}, {
		name:   "a miss attaches to the next event",
		limit:  8,
		pushes: []push{{event: 1}, {miss: 1}, {event: 3}},
		close:  true,
		want:   []step{{Event: 1}, lag(1), {Event: 3}, closed()},
	}, {
		name:   "a trailing miss is reported before ErrClosed",
		limit:  8,
		pushes: []push{{event: 1}, {miss: 2}},
		close:  true,
		want:   []step{{Event: 1}, lag(2), closed()},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuffer(tt.limit)
			for _, p := range tt.pushes {
				if p.miss > 0 {
					b.miss(p.miss)
					continue
				}
				b.push(delta("s", p.event), p.gap)
			}
			if tt.close {
				b.close()
			}
			got := drain(t, b.next, len(tt.want))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
		})
	}
}

// Each overflow episode is reported once, with its own count.
func TestBufferReportsEachEpisode(t *testing.T) {
	b := newBuffer(4)
	for i := 1; i <= 6; i++ {
		b.push(delta("s", i), 0)
	}
	got := drain(t, b.next, 3) // lag(2), 3, 4
	for i := 7; i <= 9; i++ {  // 5, 6 retained; 7, 8 fit; 9 drops 5
		b.push(delta("s", i), 0)
	}
	got = append(got, drain(t, b.next, 5)...)
	want := []step{lag(2), {Event: 3}, {Event: 4}, lag(1), {Event: 6}, {Event: 7}, {Event: 8}, {Event: 9}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
}

func TestBufferAbandonDiscards(t *testing.T) {
	b := newBuffer(4)
	b.push(delta("s", 1), 0)
	b.abandon()
	b.push(delta("s", 2), 0) // ignored, and must not panic
	if _, err := b.next(t.Context()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after abandon = %v, want ErrClosed", err)
	}
}

func TestBufferNextWakesOnPushAndClose(t *testing.T) {
	b := newBuffer(4)
	got := make(chan step, 2)
	go func() {
		for range 2 {
			env, err := b.next(t.Context())
			got <- stepOf(t, env, err)
		}
	}()
	b.push(delta("s", 1), 0)
	if s := <-got; s != (step{Event: 1}) {
		t.Fatalf("first Next = %+v, want event 1", s)
	}
	b.close()
	if s := <-got; s != closed() {
		t.Fatalf("Next after close = %+v, want ErrClosed", s)
	}
}
