package lru_test

import (
	"testing"

	"github.com/keelrun/keel/internal/lru"
)

func TestLRUEvictsLeastRecentlyUsed(t *testing.T) {
	c := lru.New[int](2)
	c.Put("a", 1)
	c.Put("b", 2)
	if v, ok := c.Get("a"); !ok || v != 1 { // a is now the most recent
		t.Fatalf("Get(a) = %d, %v; want 1, true", v, ok)
	}
	c.Put("c", 3) // evicts b
	if _, ok := c.Get("b"); ok {
		t.Error("b survived eviction")
	}
	for key, want := range map[string]int{"a": 1, "c": 3} {
		if v, ok := c.Get(key); !ok || v != want {
			t.Errorf("Get(%s) = %d, %v; want %d, true", key, v, ok, want)
		}
	}
	c.Put("a", 10) // update in place
	if v, _ := c.Get("a"); v != 10 || c.Len() != 2 {
		t.Errorf("after update Get(a) = %d, len %d; want 10, 2", v, c.Len())
	}
}
