package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/keelrun/keel/claimcheck"
)

// A value larger than one chunk is stored as its chunks plus a tree of
// small node objects over them; its reference names the root node. A node
// is
//
//	"keeltree" 0x01 LEVEL COUNT (DIGEST SIZE){COUNT}
//
// with LEVEL a byte (0: the children are data chunks; L > 0: they are
// nodes of level L-1), COUNT a uvarint, each DIGEST the 32-byte SHA-256
// of a child object and SIZE a uvarint, the number of value bytes under
// it. A node ends after a child whose digest's last byte is a multiple of
// nodeFanout (so about every nodeFanout children, decided by content, which
// keeps the nodes of a shared prefix shared too) or at maxFanout children.
// A value that shares a prefix with a stored one therefore adds its new
// chunks, the chunk or two where they part, and one node a level.
//
// Objects written before chunking (and values of one chunk) are the whole
// proto-marshaled payload, whose first byte is a proto tag (0x0a, 0x12,
// 0x1a) or nothing, never 'k': that is how a reader tells them apart.

// nodeMagic starts every tree node.
var nodeMagic = []byte("keeltree\x01")

const (
	// nodeFanout is the average number of children of a node: the node
	// at the end of each level is stored again by each new value, so
	// nodes stay small (about 600 bytes).
	nodeFanout = 16
	// maxFanout bounds a node's children, hence its size (about 9 KiB).
	maxFanout = 256
	// maxLevels bounds a tree's height: a value of MaxValueBytes in
	// MinChunk chunks, two to a node (the fewest), needs 21 levels; at the
	// average fanout, 5.
	maxLevels = 24
	// MaxValueBytes bounds the value a reference may name: a reader
	// refuses (ErrTooLarge) a tree that says it holds more, before it
	// reads the chunks.
	MaxValueBytes = 1 << 30
)

// ErrTooLarge: a stored value (or an object gc reads) is larger than the
// reader's bound.
var ErrTooLarge = errors.New("store: value too large")

// entry is one child of a node.
type entry struct {
	key  claimcheck.Key
	size uint64
}

// isNode reports whether a stored object is a tree node.
func isNode(obj []byte) bool { return bytes.HasPrefix(obj, nodeMagic) }

func encodeNode(level int, children []entry) []byte {
	b := append([]byte(nil), nodeMagic...)
	b = append(b, byte(level))
	b = binary.AppendUvarint(b, uint64(len(children)))
	for _, c := range children {
		d, _ := hex.DecodeString(c.key.Digest())
		b = append(b, d...)
		b = binary.AppendUvarint(b, c.size)
	}
	return b
}

// decodeNode parses a node read from the store; key names it in errors.
func decodeNode(key claimcheck.Key, obj []byte) (level int, children []entry, err error) {
	bad := func(what string) error {
		return fmt.Errorf("%w: %s is not a well-formed tree node: %s", ErrCorrupt, key, what)
	}
	b := obj[len(nodeMagic):]
	if len(b) < 1 {
		return 0, nil, bad("no level")
	}
	level, b = int(b[0]), b[1:]
	if level >= maxLevels {
		return 0, nil, bad(fmt.Sprintf("level %d", level))
	}
	n, w := binary.Uvarint(b)
	if w <= 0 || n == 0 || n > maxFanout {
		return 0, nil, bad("child count")
	}
	b = b[w:]
	children = make([]entry, 0, n)
	var total uint64
	for range n {
		if len(b) < 32 {
			return 0, nil, bad("truncated")
		}
		k := claimcheck.Key("sha256:" + hex.EncodeToString(b[:32]))
		size, w := binary.Uvarint(b[32:])
		if w <= 0 || size == 0 || size > MaxValueBytes {
			return 0, nil, bad("child size")
		}
		b = b[32+w:]
		total += size
		if total > MaxValueBytes {
			return 0, nil, fmt.Errorf("%w: %s holds over %d bytes", ErrTooLarge, key, MaxValueBytes)
		}
		children = append(children, entry{k, size})
	}
	if len(b) != 0 {
		return 0, nil, bad("trailing bytes")
	}
	return level, children, nil
}

// putValue stores data as chunks and a tree over them, and returns the key
// of the root (or, for data of one chunk, of data itself).
func (s *Store) putValue(ctx context.Context, data []byte) (claimcheck.Key, error) {
	cs := chunks(data)
	if len(cs) <= 1 {
		return s.Put(ctx, data)
	}
	level := make([]entry, len(cs))
	for i, c := range cs {
		k, err := s.Put(ctx, c)
		if err != nil {
			return "", err
		}
		level[i] = entry{k, uint64(len(c))}
	}
	for height := 0; ; height++ {
		var up []entry
		start := 0
		for i, e := range level {
			n := i + 1 - start
			d := e.key.Digest()
			last, _ := hex.DecodeString(d[len(d)-2:])
			if i == len(level)-1 || n == maxFanout || (n >= 2 && last[0]%nodeFanout == 0) {
				group := level[start : i+1]
				k, err := s.Put(ctx, encodeNode(height, group))
				if err != nil {
					return "", err
				}
				var size uint64
				for _, g := range group {
					size += g.size
				}
				up = append(up, entry{k, size})
				start = i + 1
			}
		}
		if len(up) == 1 {
			return up[0].key, nil
		}
		level = up
	}
}

// getValue returns the value stored under key: the object itself, or the
// chunks its tree names, each verified against its key.
func (s *Store) getValue(ctx context.Context, key claimcheck.Key) ([]byte, error) {
	obj, err := s.Get(ctx, key)
	if err != nil || !isNode(obj) {
		return obj, err
	}
	level, children, err := decodeNode(key, obj)
	if err != nil {
		return nil, err
	}
	var total uint64
	for _, c := range children {
		total += c.size
	}
	// The claimed size is bounded, but allocate for it only as it arrives.
	out := make([]byte, 0, min(total, 16<<20))
	out, err = s.appendTree(ctx, out, level, children)
	if err != nil {
		return nil, err
	}
	if uint64(len(out)) != total {
		return nil, fmt.Errorf("%w: the tree %s holds %d bytes, not the %d it says", ErrCorrupt, key, len(out), total)
	}
	return out, nil
}

// appendTree appends the data under children, which a node of level
// level lists, checking each child's size and level.
func (s *Store) appendTree(ctx context.Context, out []byte, level int, children []entry) ([]byte, error) {
	for _, c := range children {
		obj, err := s.Get(ctx, c.key)
		if err != nil {
			return nil, err
		}
		if level == 0 {
			if uint64(len(obj)) != c.size {
				return nil, fmt.Errorf("%w: chunk %s is %d bytes, its node says %d", ErrCorrupt, c.key, len(obj), c.size)
			}
			out = append(out, obj...)
			continue
		}
		if !isNode(obj) {
			return nil, fmt.Errorf("%w: %s should be a tree node of level %d", ErrCorrupt, c.key, level-1)
		}
		l, grand, err := decodeNode(c.key, obj)
		if err != nil {
			return nil, err
		}
		if l != level-1 {
			return nil, fmt.Errorf("%w: %s is a node of level %d under one of level %d", ErrCorrupt, c.key, l, level)
		}
		before := len(out)
		if out, err = s.appendTree(ctx, out, l, grand); err != nil {
			return nil, err
		}
		if uint64(len(out)-before) != c.size {
			return nil, fmt.Errorf("%w: node %s holds %d bytes, its parent says %d", ErrCorrupt, c.key, len(out)-before, c.size)
		}
	}
	return out, nil
}
