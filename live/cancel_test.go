package live

import (
	"testing"
)

// Cancel notices reach every listener on the channel, from another
// connection on NATS, and stop reaching one once it stops listening.
func TestCancelNotices(t *testing.T) {
	srv := startNATSServer(t)
	nats1 := dialNATS(t, srv.ClientURL(), NATSOptions{Prefix: "acme"})
	nats2 := dialNATS(t, srv.ClientURL(), NATSOptions{Prefix: "acme"})
	for _, tc := range []struct {
		name       string
		from, to   CancelNotices
		flushAfter func() error
	}{
		{name: "memory", from: NewMemory()},
		{name: "nats", from: nats1, to: nats2, flushAfter: nats2.nc.Flush},
	} {
		t.Run(tc.name, func(t *testing.T) {
			to := tc.to
			if to == nil {
				to = tc.from
			}
			got := make(chan CancelNotice, 4)
			stop, err := to.OnCancel(func(n CancelNotice) { got <- n })
			if err != nil {
				t.Fatal(err)
			}
			if tc.flushAfter != nil {
				if err := tc.flushAfter(); err != nil {
					t.Fatal(err)
				}
			}
			want := CancelNotice{WorkflowID: "s1/run-2", RunID: testRunID}
			if err := tc.from.NotifyCancel(want); err != nil {
				t.Fatal(err)
			}
			if n := wait(t, got, "the cancel notice"); n != want {
				t.Fatalf("notice = %+v, want %+v", n, want)
			}

			stop()
			if tc.flushAfter != nil {
				if err := tc.flushAfter(); err != nil {
					t.Fatal(err)
				}
			}
			// A notice after stop, then one to a listener still there:
			// the second arrives and the first never does.
			if err := tc.from.NotifyCancel(CancelNotice{WorkflowID: "late", RunID: testRunID}); err != nil {
				t.Fatal(err)
			}
			again := make(chan CancelNotice, 4)
			stop2, err := to.OnCancel(func(n CancelNotice) { again <- n })
			if err != nil {
				t.Fatal(err)
			}
			defer stop2()
			if tc.flushAfter != nil {
				if err := tc.flushAfter(); err != nil {
					t.Fatal(err)
				}
			}
			if err := tc.from.NotifyCancel(want); err != nil {
				t.Fatal(err)
			}
			wait(t, again, "the second notice")
			select {
			case n := <-got:
				t.Fatalf("a stopped listener got %+v", n)
			default:
			}
		})
	}
}

// testRunID is a Temporal run ID, a UUID.
const testRunID = "0196f0d2-7b5e-7c3a-9d2e-1f2a3b4c5d6e"
