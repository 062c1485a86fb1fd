package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"gocloud.dev/blob"
	"google.golang.org/protobuf/proto"

	"github.com/keelrun/keel/claimcheck"
	"github.com/keelrun/keel/crypt"
)

// Garbage collection: a Collector marks every object that the payloads it
// is shown (a namespace's histories, `keel store gc`) reach, and Sweep
// deletes the objects it did not mark that are older than the grace
// period. docs/ARCHITECTURE.md ("Garbage collection") says why that is
// safe against writes in progress and against a collection killed midway.
const (
	// DefaultGrace is how old an unreferenced object must be before a
	// collection deletes it.
	DefaultGrace = time.Hour
	// MinGrace is the least grace a Collector accepts: an object a writer
	// relies on is at most RefreshAge + freshFor old when its reference is
	// made (Put), and the reference must reach a history within the rest.
	MinGrace = RefreshAge + freshFor + 5*time.Minute
	// sweepProgressEvery is how many objects Sweep lists between reports.
	sweepProgressEvery = 1000
)

// Errors of a collection.
var (
	// ErrGrace: CollectOptions.Grace is below MinGrace.
	ErrGrace = errors.New("store: grace period too short")
	// ErrSealed: a payload to mark is encrypted and the Collector has no
	// key to look inside it for the keys it names.
	ErrSealed = errors.New("store: encrypted payload, and no key to read it")
	// ErrIncomplete: Sweep was called after a Mark failed; deleting then
	// could delete what the failed payload reaches.
	ErrIncomplete = errors.New("store: marking failed, not sweeping")
)

// CollectOptions configures a Collector.
type CollectOptions struct {
	// Grace: an unreferenced object younger than this is kept. Optional;
	// default DefaultGrace; at least MinGrace.
	Grace time.Duration
	// DryRun makes Sweep count what it would delete and delete nothing.
	DryRun bool
	// Decrypt opens encrypted payloads, so that the keys inside them are
	// found (crypt.Codec with the namespace's key file). Optional; without
	// it an encrypted payload fails Mark with ErrSealed.
	Decrypt converter.PayloadCodec
	// Now is the clock, for tests. Optional; default time.Now.
	Now func() time.Time
}

// CollectStats counts what a collection did.
type CollectStats struct {
	// Marked objects are reachable from what Mark was shown; Missing are
	// keys it named that the store does not hold (references past their
	// value, or text that only looks like a key).
	Marked, Missing int
	// Listed objects are the store's; of them Kept were marked, Young were
	// not but are within the grace period, Deleted were (or, dry run,
	// would be) deleted.
	Listed, Kept, Young, Deleted                     int
	ListedBytes, KeptBytes, YoungBytes, DeletedBytes int64
}

// Collector finds and deletes the objects nothing references. Mark every
// payload that may reference the store, then Sweep once.
type Collector struct {
	store   *Store
	opts    CollectOptions
	cutoff  time.Time
	marked  map[claimcheck.Key]bool
	edges   map[claimcheck.Key]edges
	stats   CollectStats
	failed  error
	pending []claimcheck.Key
	// beforeDelete, if set, runs before each delete (tests stop a sweep).
	beforeDelete func()
}

// edges are the first and last bytes of the data under an object, so a
// key that straddles two chunks is found.
type edges struct{ head, tail []byte }

// keyText is the length of a key's text, "sha256:" and 64 hex digits.
const keyText = len("sha256:") + 64

// NewCollector starts a collection now: objects written from now on (and
// within the grace period before) are kept whatever Mark sees.
func (s *Store) NewCollector(opts CollectOptions) (*Collector, error) {
	if opts.Grace == 0 {
		opts.Grace = DefaultGrace
	}
	if opts.Grace < MinGrace {
		return nil, fmt.Errorf("%w: %s is under %s", ErrGrace, opts.Grace, MinGrace)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Collector{store: s, opts: opts, cutoff: opts.Now().Add(-opts.Grace),
		marked: map[claimcheck.Key]bool{}, edges: map[claimcheck.Key]edges{}}, nil
}

// Stats returns the counts so far.
func (c *Collector) Stats() CollectStats { return c.stats }

// Mark keeps everything p reaches: the value a reference names (its
// chunks and tree too) and every key written as text ("sha256:" and 64
// hex digits) inside p or inside what it reaches, such as the event
// segments a session's state lists. A failure makes Sweep refuse.
func (c *Collector) Mark(ctx context.Context, p *commonpb.Payload) error {
	err := c.mark(ctx, p)
	if err != nil && c.failed == nil {
		c.failed = err
	}
	return err
}

func (c *Collector) mark(ctx context.Context, p *commonpb.Payload) error {
	if claimcheck.IsReference(p) {
		key, _, err := claimcheck.ParseReference(p)
		if err != nil {
			return err
		}
		c.pending = append(c.pending, key)
	} else if err := c.scanPayload(p); err != nil {
		return err
	}
	for len(c.pending) > 0 {
		key := c.pending[len(c.pending)-1]
		c.pending = c.pending[:len(c.pending)-1]
		if err := c.markValue(ctx, key); err != nil {
			return err
		}
	}
	return nil
}

// scanPayload queues the keys written in p, decrypting it first.
func (c *Collector) scanPayload(p *commonpb.Payload) error {
	if crypt.IsEncrypted(p) {
		if c.opts.Decrypt == nil {
			return fmt.Errorf("%w (key %q)", ErrSealed, crypt.KeyID(p))
		}
		out, err := c.opts.Decrypt.Decode([]*commonpb.Payload{p})
		if err != nil {
			return err
		}
		p = out[0]
		if crypt.IsEncrypted(p) {
			return fmt.Errorf("%w: it decrypted to another encrypted payload", ErrSealed)
		}
	}
	for _, v := range p.GetMetadata() {
		c.scan(v)
	}
	c.scan(p.GetData())
	return nil
}

// scan queues every key written in b.
func (c *Collector) scan(b []byte) {
	for {
		i := bytes.Index(b, []byte("sha256:"))
		if i < 0 {
			return
		}
		if len(b)-i >= keyText {
			if k, err := claimcheck.ParseKey(string(b[i : i+keyText])); err == nil && !c.marked[k] {
				c.pending = append(c.pending, k)
			}
		}
		b = b[i+1:]
	}
}

// markValue marks the value stored under key (named by a reference or
// written as text) and queues the keys inside it.
func (c *Collector) markValue(ctx context.Context, key claimcheck.Key) error {
	if c.marked[key] {
		return nil
	}
	obj, err := c.store.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		c.marked[key] = true
		c.stats.Missing++
		return nil
	}
	if err != nil {
		return err
	}
	if !isNode(obj) {
		c.marked[key] = true
		c.stats.Marked++
		var p commonpb.Payload
		if proto.Unmarshal(obj, &p) == nil {
			return c.scanPayload(&p)
		}
		c.scan(obj)
		return nil
	}
	e, err := c.markTree(ctx, key, obj, -1)
	if err != nil {
		return err
	}
	if !bytes.Contains(e.head, []byte(crypt.EncodingEncrypted)) {
		return nil
	}
	// Encrypted: its chunks are ciphertext, so read the whole value to
	// look inside. (Chunks of an encrypted value are never shared: each
	// encryption differs.)
	data, err := c.store.getValue(ctx, key)
	if err != nil {
		return err
	}
	var p commonpb.Payload
	if err := proto.Unmarshal(data, &p); err != nil {
		return nil
	}
	return c.scanPayload(&p)
}

// markTree marks the node key (read as obj; want is its expected level,
// -1 for a root) and everything under it, scans its data (each chunk once,
// and where chunks meet) and returns its edges.
func (c *Collector) markTree(ctx context.Context, key claimcheck.Key, obj []byte, want int) (edges, error) {
	if e, ok := c.edges[key]; ok {
		return e, nil
	}
	level, children, err := decodeNode(key, obj)
	if err != nil {
		return edges{}, err
	}
	if want >= 0 && level != want {
		return edges{}, fmt.Errorf("%w: %s is a node of level %d under one of level %d", ErrCorrupt, key, level, want+1)
	}
	c.marked[key] = true
	c.stats.Marked++
	var all edges
	var prevTail []byte
	for i, ch := range children {
		e, err := c.child(ctx, ch.key, level)
		if err != nil {
			return edges{}, err
		}
		if i == 0 {
			all.head = e.head
		}
		c.scan(append(append([]byte(nil), prevTail...), e.head...))
		prevTail = e.tail
	}
	all.tail = prevTail
	c.edges[key] = all
	return all, nil
}

// child marks a child of a node of level parent and returns its edges.
func (c *Collector) child(ctx context.Context, key claimcheck.Key, parent int) (edges, error) {
	if e, ok := c.edges[key]; ok {
		return e, nil
	}
	obj, err := c.store.Get(ctx, key)
	if err != nil {
		// A tree with a missing part cannot be read: not a reason to
		// delete the rest, and no reason to stop.
		if errors.Is(err, ErrNotFound) {
			c.stats.Missing++
			c.edges[key] = edges{}
			return edges{}, nil
		}
		return edges{}, err
	}
	if parent > 0 {
		if !isNode(obj) {
			return edges{}, fmt.Errorf("%w: %s should be a tree node of level %d", ErrCorrupt, key, parent-1)
		}
		return c.markTree(ctx, key, obj, parent-1)
	}
	c.marked[key] = true
	c.stats.Marked++
	c.scan(obj)
	n := min(len(obj), 2*keyText)
	e := edges{head: bytes.Clone(obj[:n]), tail: bytes.Clone(obj[len(obj)-min(len(obj), keyText):])}
	c.edges[key] = e
	return e, nil
}

// Sweep lists the store and deletes each object that Mark did not reach
// and that was last written before the grace period, reporting progress
// every sweepProgressEvery objects. It is safe to stop at any point: what
// it deleted nothing referenced, and what it left a later Sweep finds.
// Just before deleting it reads the object's time again, so an object a
// writer refreshed (Put) while the collection ran is kept.
func (c *Collector) Sweep(ctx context.Context, progress func(CollectStats)) (CollectStats, error) {
	if c.failed != nil {
		return c.stats, fmt.Errorf("%w: %w", ErrIncomplete, c.failed)
	}
	it := c.store.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return c.stats, nil
		}
		if err != nil {
			return c.stats, fmt.Errorf("%w: list %s: %w", ErrUnreachable, c.store.url, err)
		}
		key, err := claimcheck.ParseKey("sha256:" + strings.TrimPrefix(obj.Key, prefix))
		if err != nil || obj.IsDir {
			continue // not an object of this store's
		}
		c.stats.Listed++
		c.stats.ListedBytes += obj.Size
		if c.stats.Listed%sweepProgressEvery == 0 && progress != nil {
			progress(c.stats)
		}
		switch {
		case c.marked[key]:
			c.stats.Kept++
			c.stats.KeptBytes += obj.Size
			continue
		case !obj.ModTime.Before(c.cutoff):
			c.young(obj.Size)
			continue
		}
		if !c.opts.DryRun {
			attrs, err := c.store.bucket.Attributes(ctx, obj.Key)
			if err != nil {
				return c.stats, c.store.fail("get", key, err)
			}
			if !attrs.ModTime.Before(c.cutoff) {
				c.young(obj.Size)
				continue
			}
			if c.beforeDelete != nil {
				c.beforeDelete()
			}
			if err := ctx.Err(); err != nil {
				return c.stats, err
			}
			if err := c.store.bucket.Delete(ctx, obj.Key); err != nil {
				if ctx.Err() != nil {
					return c.stats, ctx.Err()
				}
				return c.stats, fmt.Errorf("%w: delete %s from %s: %w", ErrUnreachable, key, c.store.url, err)
			}
			c.store.fresh.forget(key)
		}
		c.stats.Deleted++
		c.stats.DeletedBytes += obj.Size
	}
}

func (c *Collector) young(size int64) {
	c.stats.Young++
	c.stats.YoungBytes += size
}
