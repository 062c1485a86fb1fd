package live

import "testing"

func TestLRUEvictsLeastRecentlyUsed(t *testing.T) {
	c := newLRU[int](2)
	c.put("a", 1)
	c.put("b", 2)
	if v, ok := c.get("a"); !ok || v != 1 { // a is now the most recent
		t.Fatalf("get(a) = %d, %v; want 1, true", v, ok)
	}
	c.put("c", 3) // evicts b
	if _, ok := c.get("b"); ok {
		t.Error("b survived eviction")
	}
	for key, want := range map[string]int{"a": 1, "c": 3} {
		if v, ok := c.get(key); !ok || v != want {
			t.Errorf("get(%s) = %d, %v; want %d, true", key, v, ok, want)
		}
	}
	c.put("a", 10) // update in place
	if v, _ := c.get("a"); v != 10 || c.len() != 2 {
		t.Errorf("after update get(a) = %d, len %d; want 10, 2", v, c.len())
	}
}

// A publisher that forgot a session's counter starts a new stream for it,
// which subscribers take as a fresh start: no false gap, nothing dropped as
// a repeat.
func TestNATSForgottenSessionStartsANewStream(t *testing.T) {
	srv := startNATSServer(t)
	pub := dialNATS(t, srv.ClientURL(), NATSOptions{})
	pub.streams = newLRU[*pubStream](1)
	subCh := dialNATS(t, srv.ClientURL(), NATSOptions{})
	sub := subscribe(t, subCh, "s1", 0)

	publish(t, pub, "s1", 1, 2)
	publish(t, pub, "s2", 1, 1) // pushes s1's counter out
	publish(t, pub, "s1", 3, 4)
	expect(t, sub, events(1, 4))
}
