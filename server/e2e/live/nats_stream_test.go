package live_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/keelrun/keel/internal/livetest"
	"github.com/keelrun/keel/live"
)

// maxPubStreams is how many sessions' counters a publisher keeps
// (docs/live.md, "Across processes").
const maxPubStreams = 4096

// A publisher that forgot a session's counter starts a new stream for it,
// which subscribers take as a fresh start: no false gap, nothing dropped as
// a repeat.
func TestNATSForgottenSessionStartsANewStream(t *testing.T) {
	srv := startNATSServer(t)
	raw := connect(t, srv.ClientURL())
	wire, err := raw.SubscribeSync(live.Subject(live.DefaultPrefix, "s1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	pub := dialNATS(t, srv.ClientURL(), live.NATSOptions{})
	sub := livetest.Subscribe(t, dialNATS(t, srv.ClientURL(), live.NATSOptions{}), "s1", 0)

	livetest.Publish(t, pub, "s1", 1, 2)
	for i := range maxPubStreams { // push s1's counter out
		livetest.Publish(t, pub, "other"+strconv.Itoa(i), 1, 1)
	}
	livetest.Publish(t, pub, "s1", 3, 4)
	livetest.Expect(t, sub, livetest.Events(1, 4))

	// On the wire, s1's third event starts a stream of its own at 1.
	var streams, counts []string
	for range 4 {
		m, err := wire.NextMsg(livetest.Guard)
		if err != nil {
			t.Fatal(err)
		}
		stream, n, _ := strings.Cut(m.Header.Get(headerLive), " ")
		streams, counts = append(streams, stream), append(counts, n)
	}
	if streams[1] != streams[0] || streams[2] == streams[1] || streams[3] != streams[2] ||
		strings.Join(counts, " ") != "1 2 1 2" {
		t.Errorf("s1's streams %q, counters %q: want the publisher to forget s1 after %d other sessions", streams, counts, maxPubStreams)
	}
}
