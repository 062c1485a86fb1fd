package store

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/keelrun/keel/claimcheck"
)

// text returns n bytes of random base64, content that shares nothing.
func text(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return []byte(base64.StdEncoding.EncodeToString(b)[:n])
}

func TestChunkBounds(t *testing.T) {
	data := text(t, 2<<20)
	cs := chunks(data)
	require.Equal(t, data, bytes.Join(cs, nil))
	for i, c := range cs[:len(cs)-1] {
		require.GreaterOrEqual(t, len(c), MinChunk, "chunk %d", i)
		require.LessOrEqual(t, len(c), MaxChunk, "chunk %d", i)
	}
	avg := len(data) / len(cs)
	require.True(t, avg > 8<<10 && avg < 16<<10, "average chunk %d bytes", avg)
	// Constant data never meets the mask: MaxChunk cuts.
	for _, c := range chunks(bytes.Repeat([]byte{'x'}, 3*MaxChunk)) {
		require.Equal(t, MaxChunk, len(c))
	}
}

// storeBytes is the total size of the objects in s.
func storeBytes(t *testing.T, s *Store) (objects int, size int64) {
	t.Helper()
	it := s.bucket.List(nil)
	for {
		obj, err := it.Next(t.Context())
		if err != nil {
			break
		}
		objects++
		size += obj.Size
	}
	return objects, size
}

// Two values that share a prefix share its chunks: storing the longer after
// the shorter adds about what it adds, not its whole length.
func TestTreeSharesPrefixes(t *testing.T) {
	s := open(t, "mem://")
	c := NewCodec(s, CodecOptions{})
	prefix := text(t, 1<<20)
	first := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("binary/plain")}, Data: prefix}
	second := &commonpb.Payload{Metadata: first.Metadata, Data: append(append([]byte(nil), prefix...), text(t, 64<<10)...)}
	refs, err := c.Encode([]*commonpb.Payload{first})
	require.NoError(t, err)
	_, before := storeBytes(t, s)
	refs2, err := c.Encode([]*commonpb.Payload{second})
	require.NoError(t, err)
	_, after := storeBytes(t, s)
	added := after - before
	require.Less(t, added, int64(64<<10)*3/2, "storing 64 KiB more added %d bytes", added)
	dec, err := c.Decode(append(refs, refs2...))
	require.NoError(t, err)
	require.True(t, proto.Equal(first, dec[0]))
	require.True(t, proto.Equal(second, dec[1]))
}

// References written before chunking (one object a value) still decode.
func TestTreeReadsWholeObjects(t *testing.T) {
	s := open(t, "mem://")
	p := &commonpb.Payload{Data: text(t, 300<<10)}
	old, err := NewCodec(s, CodecOptions{WholeObjects: true}).Encode([]*commonpb.Payload{p})
	require.NoError(t, err)
	key, _, err := claimcheck.ParseReference(old[0])
	require.NoError(t, err)
	require.Equal(t, claimcheck.KeyOf(mustMarshal(t, p)), key, "one object, as before")
	dec, err := NewCodec(s, CodecOptions{}).Decode(old)
	require.NoError(t, err)
	require.True(t, proto.Equal(p, dec[0]))
}

// A damaged or hostile tree fails with a typed error, never a wrong value
// or an unbounded read.
func TestTreeRefusesBadNodes(t *testing.T) {
	s := open(t, "mem://")
	ctx := t.Context()
	chunk, err := s.Put(ctx, []byte("abc"))
	require.NoError(t, err)
	node := func(level int, es ...entry) claimcheck.Key {
		k, err := s.Put(ctx, encodeNode(level, es))
		require.NoError(t, err)
		return k
	}
	leaf := node(0, entry{chunk, 3}, entry{chunk, 3})
	v, err := s.getValue(ctx, leaf)
	require.NoError(t, err)
	require.Equal(t, "abcabc", string(v))
	missing := claimcheck.KeyOf([]byte("never stored"))
	for name, tc := range map[string]struct {
		key  claimcheck.Key
		want error
	}{
		"wrong chunk size":     {node(0, entry{chunk, 4}), ErrCorrupt},
		"wrong level below":    {node(2, entry{leaf, 6}), ErrCorrupt},
		"data where a node is": {node(1, entry{chunk, 3}), ErrCorrupt},
		"wrong subtree size":   {node(1, entry{leaf, 7}), ErrCorrupt},
		"missing chunk":        {node(0, entry{missing, 5}), ErrNotFound},
		"too high":             {node(maxLevels, entry{leaf, 6}), ErrCorrupt},
		"too large":            {node(0, entry{chunk, MaxValueBytes}, entry{chunk, 1}), ErrTooLarge},
		"truncated":            {mustPut(t, s, encodeNode(0, []entry{{chunk, 3}})[:20]), ErrCorrupt},
		"no children":          {mustPut(t, s, encodeNode(0, nil)), ErrCorrupt},
	} {
		_, err := s.getValue(ctx, tc.key)
		require.ErrorIs(t, err, tc.want, name)
	}
}

func mustPut(t *testing.T, s *Store, data []byte) claimcheck.Key {
	t.Helper()
	k, err := s.Put(t.Context(), data)
	require.NoError(t, err)
	return k
}

