package live

import "container/list"

// lru is a bounded map that forgets the least recently used key. Both ends
// of the NATS channel keep per-stream counters in one, so a long-lived
// worker or subscriber does not grow without bound as sessions and
// publishers come and go. Not safe for concurrent use.
type lru[V any] struct {
	max   int
	order *list.List // front = most recently used; values are *lruEntry[V]
	index map[string]*list.Element
}

type lruEntry[V any] struct {
	key string
	val V
}

func newLRU[V any](max int) *lru[V] {
	return &lru[V]{max: max, order: list.New(), index: make(map[string]*list.Element)}
}

// get returns key's value and marks it used.
func (c *lru[V]) get(key string) (V, bool) {
	e, ok := c.index[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*lruEntry[V]).val, true
}

// put sets key's value, evicting the least recently used key if full.
func (c *lru[V]) put(key string, val V) {
	if e, ok := c.index[key]; ok {
		e.Value.(*lruEntry[V]).val = val
		c.order.MoveToFront(e)
		return
	}
	if c.order.Len() >= c.max {
		last := c.order.Back()
		delete(c.index, last.Value.(*lruEntry[V]).key)
		c.order.Remove(last)
	}
	c.index[key] = c.order.PushFront(&lruEntry[V]{key: key, val: val})
}

func (c *lru[V]) len() int { return c.order.Len() }
