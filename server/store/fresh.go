package store

import (
	"sync"
	"time"

	"github.com/keelrun/keel/claimcheck"
)

// Freshness of stored objects, which is what makes a collection safe
// against writes in progress (docs/ARCHITECTURE.md, "Garbage collection").
const (
	// RefreshAge: Put writes an existing object again when it is older
	// than this, so an object a new value uses is never older than
	// RefreshAge + freshFor when its reference is made.
	RefreshAge = 10 * time.Minute
	// freshFor: Put trusts, for this long, that an object it wrote or
	// found recent is still there, and skips asking the store (a
	// transcript's thousand shared chunks cost no requests run after run).
	freshFor = 5 * time.Minute
	// maxFreshKeys bounds the memory of that trust; past it, it starts over.
	maxFreshKeys = 1 << 16
)

// freshKeys remembers the objects Put found or made recent.
type freshKeys struct {
	mu   sync.Mutex
	seen map[claimcheck.Key]time.Time
}

func (f *freshKeys) recent(k claimcheck.Key) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.seen[k]
	return ok && time.Since(t) < freshFor
}

func (f *freshKeys) add(k claimcheck.Key) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil || len(f.seen) >= maxFreshKeys {
		f.seen = make(map[claimcheck.Key]time.Time)
	}
	f.seen[k] = time.Now()
}

// forget drops what freshKeys remembers of k: the collector deleted it.
func (f *freshKeys) forget(k claimcheck.Key) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.seen, k)
}
