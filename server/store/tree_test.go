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
	require.True(t, avg > MinChunk && avg < MinChunk+2*(chunkMask+1), "average chunk %d bytes", avg)
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
	meta := map[string][]byte{"encoding": []byte("binary/plain")}
	value := text(t, 1<<20)
	var values []*commonpb.Payload
	const steps, more = 16, 64 << 10
	_, before := storeBytes(t, s)
	for range steps {
		value = append(value[:len(value):len(value)], text(t, more)...)
		values = append(values, &commonpb.Payload{Metadata: meta, Data: value})
	}
	_, start := storeBytes(t, s)
	require.Zero(t, start-before)
	var refs []*commonpb.Payload
	for i, p := range values {
		ref, err := c.Encode([]*commonpb.Payload{p})
		require.NoError(t, err)
		refs = append(refs, ref...)
		if i == 0 {
			_, before = storeBytes(t, s)
		}
	}
	_, after := storeBytes(t, s)
	perStep := float64(after-before) / (steps - 1) / more
	t.Logf("bytes stored per %d bytes appended: %.2f×", more, perStep)
	require.Less(t, perStep, 1.5)
	dec, err := c.Decode(refs)
	require.NoError(t, err)
	for i := range values {
		require.True(t, proto.Equal(values[i], dec[i]), "value %d", i)
	}
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

// A reader through the codec endpoint (claimcheck's remote codec, the
// light client's) reads old single-object references and chunked ones.
func TestTreeThroughEndpoint(t *testing.T) {
	s := open(t, "mem://")
	p := &commonpb.Payload{Data: text(t, 200<<10)}
	old, err := NewCodec(s, CodecOptions{WholeObjects: true}).Encode([]*commonpb.Payload{p})
	require.NoError(t, err)
	c := NewCodec(s, CodecOptions{})
	chunked, err := c.Encode([]*commonpb.Payload{p})
	require.NoError(t, err)
	require.NotEqual(t, string(old[0].GetData()), string(chunked[0].GetData()))
	srv, _ := codecServer(t, c.Handler(HandlerOptions{}))
	dec, err := claimcheck.NewRemoteCodec(srv.URL, claimcheck.RemoteOptions{}).Decode(append(old, chunked...))
	require.NoError(t, err)
	require.True(t, proto.Equal(p, dec[0]), "the old reference")
	require.True(t, proto.Equal(p, dec[1]), "the chunked one")
}
