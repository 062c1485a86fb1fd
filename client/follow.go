package client

import (
	"context"
	"errors"
	"iter"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/converter"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
	"github.com/keelrun/keel/live"
)

// follower reads a session's durable log from a cursor and follows it as it
// grows, across runs. It delivers every durable event after the cursor
// exactly once, in sequence order.
type follower struct {
	c       *Client
	session string
	after   int64
	// run, when set, limits delivery to one run's events and ends after its
	// terminal event.
	run string
}

// errStop ends a follow early without error.
var errStop = errors.New("stop")

// follow delivers durable events to emit until emit returns false, ctx
// ends, or (with f.run set) the run's terminal event was delivered.
func (f *follower) follow(ctx context.Context, emit func(keel.Envelope) bool) error {
	deliver := func(ev keel.Envelope) error {
		if ev.Seq <= f.after {
			return nil
		}
		f.after = ev.Seq
		if f.run != "" && ev.RunID != f.run {
			return nil
		}
		if !emit(ev) {
			return errStop
		}
		if f.run != "" && ev.Terminal() {
			return errStop
		}
		return nil
	}
	sw := f.c.watch(f.session)
	if err := sw.catchUp(ctx); err != nil {
		return err
	}
	for {
		if _, err := f.readLog(ctx, sw, deliver); err != nil {
			return stopped(err)
		}
		closed, err := sw.wait(ctx)
		if err != nil {
			return err
		}
		if closed {
			_, err := f.readLog(ctx, sw, deliver)
			return stopped(err)
		}
	}
}

func stopped(err error) error {
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// readLog delivers the events of the session's log after f.after that
// Temporal committed. read reports whether the log was read: a first page
// asked of a workflow task that did not commit is left for a read after
// the session's next change.
//
// After a hand-over it reads the events up to it from the state the
// closed execution handed on (readCarried), or else asks that execution:
// the next one answers only after its first workflow task, which Temporal
// holds back for up to a second when the closed one ran for less
// (continue-as-new's minimum interval). It asks the next one too once that
// ran a task.
func (f *follower) readLog(ctx context.Context, sw *historyWatcher, deliver func(keel.Envelope) error) (read bool, err error) {
	sw.pending = false
	if h := sw.handed; h != nil {
		sw.handed = nil
		ok, err := f.readCarried(ctx, h.input, deliver)
		if !ok && err == nil {
			_, err = f.readPages(ctx, sw, h.from, deliver)
		}
		if err != nil || !sw.ranTask() {
			return true, err
		}
	}
	return f.readPages(ctx, sw, "", deliver)
}

// readPages delivers the committed events after f.after that an
// execution's answers hold (the current one for ""), paging with a pinned
// snapshot. A page is committed if the workflow task its answer reflects
// completed (sw.committedAt); a closed execution's answers are (no task
// can change them).
func (f *follower) readPages(ctx context.Context, sw *historyWatcher, closedRun string, deliver func(keel.Envelope) error) (read bool, err error) {
	q := api.EventsQuery{After: f.after}
	for {
		var page api.EventsPage
		var v converter.EncodedValue
		var err error
		if closedRun != "" {
			v, err = f.c.queryRun(ctx, f.session, closedRun, api.QueryEvents, q)
		} else {
			v, err = f.c.queryWorkflow(ctx, f.session, api.QueryEvents, q)
			var notReady *serviceerror.WorkflowNotReady
			if errors.As(err, &notReady) && sw.closed && sw.before != "" {
				// The session was stopped before its last execution ran a
				// task: the one before it holds the same log.
				v, err = f.c.queryRun(ctx, f.session, sw.before, api.QueryEvents, q)
			}
		}
		if err != nil {
			return false, fromTemporal(err, "session "+f.session)
		}
		if err := v.Get(&page); err != nil {
			return false, err
		}
		switch {
		case closedRun != "" || q.Snapshot != 0 || sw.closed:
			// Continuation pages are pinned to the first one's snapshot,
			// committed once that page is.
		case page.Execution == "":
			// v0.1.0: a worker of that release names no task; its
			// commit markers bound the page (committed.go).
			if sw.runID == "" {
				if err := sw.catchUp(ctx); err != nil {
					return false, err
				}
			}
			page.Snapshot = min(page.Snapshot, sw.marked)
			page.More = page.More && page.Snapshot > q.After
		default:
			ok, err := sw.committedAt(ctx, page.Execution, page.Task)
			if err != nil || !ok {
				return false, err
			}
		}
		evs, next := page.Events, int64(0)
		if seg := page.Segment; seg != nil {
			// Older events live in the content store.
			if evs, err = f.c.segment(ctx, *seg); err != nil {
				return false, err
			}
			next = seg.Last
		} else if len(evs) > 0 {
			next = evs[len(evs)-1].Seq
		}
		for _, ev := range evs {
			if ev.Seq <= q.After {
				continue
			}
			if ev.Seq > page.Snapshot {
				return true, nil
			}
			if err := deliver(ev); err != nil {
				return true, err
			}
		}
		if !page.More || next == 0 {
			return true, nil
		}
		q = api.EventsQuery{After: next, Snapshot: page.Snapshot}
	}
}

// readCarried delivers the events after f.after from the state an
// execution handed to the next (its continue-as-new input, read with the
// client's data converter): that execution closed, so all of it is
// committed, and reading it costs no query. ok is false when this client
// cannot read it all (a content store or keys it lacks).
func (f *follower) readCarried(ctx context.Context, input *commonpb.Payloads, deliver func(keel.Envelope) error) (ok bool, err error) {
	var in carry.SessionInput
	if f.c.dc.FromPayloads(input, &in) != nil || in.Carry == nil {
		return false, nil
	}
	c := in.Carry
	var evs []keel.Envelope
	for _, seg := range c.Segments {
		if seg.Last > f.after {
			s, err := f.c.segment(ctx, seg)
			if err != nil {
				return false, nil
			}
			evs = append(evs, s...)
		}
	}
	evs = append(evs, c.Tail...)
	next := f.after + 1
	for _, ev := range evs {
		if ev.Seq < next {
			continue
		}
		if ev.Seq != next {
			return false, nil // not the log after f.after: ask instead
		}
		next++
	}
	if c.Seq > f.after && next != c.Seq+1 {
		return false, nil
	}
	after := f.after
	for _, ev := range evs {
		if ev.Seq <= after {
			continue
		}
		if err := deliver(ev); err != nil {
			return true, err
		}
	}
	return true, nil
}

// stream merges a follower's durable events with live deltas into one
// ordered stream. A delta carries the last durable sequence before it
// (AfterSeq); it is delivered after that event, held back while the
// durable stream has not reached it. Lag on the live channel is yielded as
// a *live.LaggedError element and the stream goes on.
func (c *Client) stream(ctx context.Context, f *follower, early live.Subscription) iter.Seq2[keel.Envelope, error] {
	return func(yield func(keel.Envelope, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()

		var deltas <-chan deltaItem
		if sub := early; sub != nil || c.live != nil {
			if sub == nil {
				var err error
				if sub, err = c.live.Subscribe(ctx, f.session, live.SubscribeOptions{Buffer: c.liveBuf}); err != nil {
					yield(keel.Envelope{}, err)
					return
				}
			}
			defer sub.Close()
			deltas = pumpLive(ctx, sub)
		}

		// The follower owns f from here on; keep our own cursor.
		last := f.after
		durable := make(chan keel.Envelope)
		done := make(chan error, 1)
		go func() {
			done <- f.follow(ctx, func(ev keel.Envelope) bool {
				select {
				case durable <- ev:
					return true
				case <-ctx.Done():
					return false
				}
			})
		}()

		var held []keel.Envelope
		const maxHeld = 4096
		// take handles one item of the live channel; false ends the
		// stream.
		take := func(it deltaItem) bool {
			if it.err != nil {
				var lag *live.LaggedError
				if errors.As(it.err, &lag) {
					return yield(keel.Envelope{}, it.err)
				}
				deltas = nil // the live channel is gone; durable events go on
				return true
			}
			d := it.env
			// keel's channels deliver only what passed live.Check; a
			// channel of the caller's own may not, and nothing that
			// fails it reaches the reader (docs/live.md).
			if live.Check(f.session, d) != nil || (f.run != "" && d.RunID != f.run) {
				return true
			}
			if d.AfterSeq <= last {
				return yield(d, nil)
			}
			if len(held) >= maxHeld {
				held = held[1:]
				if !yield(keel.Envelope{}, &live.LaggedError{Missed: 1}) {
					return false
				}
			}
			held = append(held, d)
			return true
		}
		for {
			select {
			case ev := <-durable:
				end := f.run != "" && ev.Terminal()
				if end && !drainLive(&deltas, take) {
					return
				}
				last = ev.Seq
				if !yield(ev, nil) || end {
					return
				}
				n := 0
				for _, d := range held {
					if d.AfterSeq <= last {
						if !yield(d, nil) {
							return
						}
						continue
					}
					held[n] = d
					n++
				}
				held = held[:n]
			case it := <-deltas:
				if !take(it) {
					return
				}
			case err := <-done:
				// Sends on durable are synchronous, so nothing is left in
				// flight once the follower returned.
				if err != nil && ctx.Err() == nil {
					yield(keel.Envelope{}, err)
				}
				return
			}
		}
	}
}

// liveDrainGap is how long a run's stream, at its terminal event, waits
// for the next delta the live channel holds before it ends.
const liveDrainGap = 100 * time.Millisecond

// drainLive takes the deltas the live channel holds when a run's stream
// reaches its terminal event: they came before it, and the channel and
// the durable log race to the reader. It reads until no delta arrives
// within liveDrainGap, so a reader that stalled while the run finished
// gets every delta its buffer kept (or counts it missed).
func drainLive(deltas *<-chan deltaItem, take func(deltaItem) bool) bool {
	gap := time.NewTimer(liveDrainGap)
	defer gap.Stop()
	// take drops the channel (*deltas = nil) when it is gone.
	for *deltas != nil {
		select {
		case it := <-*deltas:
			if !take(it) {
				return false
			}
			gap.Reset(liveDrainGap)
		case <-gap.C:
			return true
		}
	}
	return true
}

type deltaItem struct {
	env keel.Envelope
	err error
}

func pumpLive(ctx context.Context, sub live.Subscription) <-chan deltaItem {
	// Unbuffered: the subscription's own bounded buffer is where a slow
	// reader's backlog waits, so its lag count covers everything lost.
	out := make(chan deltaItem)
	go func() {
		for {
			env, err := sub.Next(ctx)
			select {
			case out <- deltaItem{env, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				var lag *live.LaggedError
				if !errors.As(err, &lag) {
					return
				}
			}
		}
	}()
	return out
}
