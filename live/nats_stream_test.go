package live

import (
	"testing"

	"github.com/keelrun/keel/internal/lru"
)

// A publisher that forgot a session's counter starts a new stream for it,
// which subscribers take as a fresh start: no false gap, nothing dropped as
// a repeat.
func TestNATSForgottenSessionStartsANewStream(t *testing.T) {
	srv := startNATSServer(t)
	pub := dialNATS(t, srv.ClientURL(), NATSOptions{})
	pub.streams = lru.New[*pubStream](1)
	subCh := dialNATS(t, srv.ClientURL(), NATSOptions{})
	sub := subscribe(t, subCh, "s1", 0)

	publish(t, pub, "s1", 1, 2)
	publish(t, pub, "s2", 1, 1) // pushes s1's counter out
	publish(t, pub, "s1", 3, 4)
	expect(t, sub, events(1, 4))
}
