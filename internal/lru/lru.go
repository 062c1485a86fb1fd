// Package lru is a bounded map that forgets the least recently used key:
// what keel's long-lived processes keep per session or per stream (the
// live channel's counters, the worker's transcript cache) stays bounded as
// sessions come and go.
package lru

import "container/list"

// Cache is a bounded map that forgets the least recently used key. Not
// safe for concurrent use: its owner locks, if it needs to.
type Cache[V any] struct {
	max   int
	order *list.List // front = most recently used; values are *lruEntry[V]
	index map[string]*list.Element
}

type lruEntry[V any] struct {
	key string
	val V
}

// New returns a cache of at most size keys (at least one).
func New[V any](size int) *Cache[V] {
	return &Cache[V]{max: max(size, 1), order: list.New(), index: make(map[string]*list.Element)}
}

// Get returns key's value and marks it used.
func (c *Cache[V]) Get(key string) (V, bool) {
	e, ok := c.index[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*lruEntry[V]).val, true
}

// Put sets key's value, evicting the least recently used key if full.
func (c *Cache[V]) Put(key string, val V) {
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

// Len returns the number of keys held.
func (c *Cache[V]) Len() int { return c.order.Len() }
