package live_test

import (
	"testing"

	"github.com/keelrun/keel/internal/livetest"
	"github.com/keelrun/keel/live"
)

// The in-process channel has every Channel's behaviour; the NATS
// channel's run of the same tests is in the server module (server/e2e/live),
// beside the NATS server they need.
func TestChannel(t *testing.T) {
	livetest.RunChannelTests(t, func(t *testing.T) *livetest.Rig {
		m := live.NewMemory()
		t.Cleanup(func() { m.Close() })
		return &livetest.Rig{
			Sub: m, Pub: m,
			NewPublisher: func(*testing.T) live.Publisher { return m },
			Settle:       func(*testing.T, int) {},
		}
	})
}

// Memory copies the payload once, so a publisher may reuse its buffer.
func TestMemoryPublisherMayReuseData(t *testing.T) {
	m := live.NewMemory()
	defer m.Close()
	sub := livetest.Subscribe(t, m, "s1", 0)
	env := livetest.Delta("s1", 1)
	if err := m.Publish(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	env.Data[0] = '9'
	livetest.Expect(t, sub, livetest.Events(1, 1))
}

func TestCancelNotices(t *testing.T) {
	m := live.NewMemory()
	defer m.Close()
	livetest.RunCancelNoticeTests(t, m, m, nil)
}
