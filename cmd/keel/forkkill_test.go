package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

// TestKillDevDuringFork kills -9 the whole `keel dev` while a fork of a
// session with 64 KiB tool results is on its way (the fork's input is
// written to the content store, then the fork's workflow is started and
// runs its first task), and right after a fork returned (its first task
// maybe not yet run), then starts it again on the same data directory.
// Each time the fork happened once or not at all: there is no session
// under its ID, or one whose log is one session.forked at seq 1 and whose
// history is the source's; the same fork asked again answers that
// session (or makes it), and the source is untouched (docs/contract.md
// §19.4).
func TestKillDevDuringFork(t *testing.T) {
	rig := newDevKillRig(t, 5*time.Minute)
	ctx := rig.ctx
	p := rig.start()
	c := rig.dial(p)
	src := c.Session("fork-kill-src")
	for i := 1; i <= 2; i++ {
		run, err := src.Send(ctx, fmt.Sprintf("prompt %d", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run.Outcome(ctx); err != nil {
			t.Fatal(err)
		}
	}
	before, err := src.History(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}

	// check asserts what a fork into id left after a kill: nothing, or
	// all of it; then asks for the same fork again.
	check := func(c *client.Client, id string) {
		t.Helper()
		fork := c.Session(id)
		st, err := fork.State(ctx)
		switch {
		case errors.Is(err, keel.ErrNotFound):
			t.Logf("%s: not forked before the kill", id)
		case err != nil:
			t.Fatalf("state of %s: %v", id, err)
		default:
			if st.Parent == nil || st.Parent.Source != src.ID() || st.Parent.Run != 2 {
				t.Fatalf("%s after the kill: parent %+v", id, st.Parent)
			}
			t.Logf("%s: forked before the kill", id)
		}
		if _, _, err := src.Fork(ctx, api.Point{Run: 2}, id); err != nil {
			t.Fatalf("the fork into %s again: %v", id, err)
		}
		log, err := fork.EventsAfter(ctx, 0)
		if err != nil || len(log) != 1 || log[0].Type != keel.TypeSessionForked || log[0].Seq != 1 {
			t.Fatalf("%s's log: %v (%v); want one session.forked", id, log, err)
		}
		hist, err := fork.History(ctx, 0, 0)
		if err != nil || fmt.Sprint(hist.Messages) != fmt.Sprint(before.Messages) || hist.Revision != before.Revision {
			t.Fatalf("%s's history (%v) is not the source's", id, err)
		}
	}

	// Killed while the fork is on its way: wherever the kill lands.
	done := make(chan error, 1)
	// The calls cut off by a kill give up on their own (the client would
	// go on asking a server that is gone until its context ends).
	gone, giveUp := context.WithTimeout(ctx, 10*time.Second)
	defer giveUp()
	go func() {
		_, _, err := src.Fork(gone, api.Point{Run: 2}, "fork-kill-during")
		done <- err
	}()
	p.kill()
	t.Logf("killed keel dev during a fork; the fork call said: %v", <-done)
	c.Close()
	p = rig.start()
	c = rig.dial(p)
	src = c.Session(src.ID())
	check(c, "fork-kill-during")

	// Killed right after a fork returned.
	if _, _, err := src.Fork(ctx, api.Point{Run: 2}, "fork-kill-after"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	p.kill()
	p = rig.start()
	c = rig.dial(p)
	src = c.Session(src.ID())
	check(c, "fork-kill-after")

	// Killed while a rewind (to run 2, where the session is) is on its
	// way: it is in the log once or not at all, and the log stays dense.
	gone, giveUp = context.WithTimeout(ctx, 10*time.Second)
	defer giveUp()
	go func() {
		_, err := src.Rewind(gone, api.Point{Run: 2})
		done <- err
	}()
	c.Close()
	p.kill()
	t.Logf("killed keel dev during a rewind; the rewind call said: %v", <-done)
	p = rig.start()
	c = rig.dial(p)
	defer c.Close()
	src = c.Session(src.ID())
	log, err := src.EventsAfter(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	rewinds := 0
	for i, ev := range log {
		if ev.Seq != int64(i+1) {
			t.Fatalf("the source's log is not dense at %d: seq %d", i, ev.Seq)
		}
		if ev.Type == keel.TypeSessionRewound {
			rewinds++
		}
	}
	if rewinds > 1 {
		t.Fatalf("%d session.rewound events after one rewind", rewinds)
	}
	t.Logf("the rewind happened %d times before the kill", rewinds)

	after, err := src.History(ctx, 0, 0)
	if err != nil || fmt.Sprint(after.Messages) != fmt.Sprint(before.Messages) {
		t.Fatalf("the source's history changed: %v", err)
	}
	// A fork runs on after the restarts.
	run, err := c.Session("fork-kill-after").Send(ctx, "on the fork")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run.Outcome(ctx); err != nil || out.Status != keel.StatusCompleted {
		t.Fatalf("the fork's run: %+v, %v", out, err)
	}
	checkStoreIntact(t, ctx, rig.st, rig.storeDir)
}
