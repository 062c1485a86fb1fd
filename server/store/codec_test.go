package store

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/keelrun/keel/claimcheck"
)

func TestCodecRoundTrip(t *testing.T) {
	c := NewCodec(open(t, "mem://"), CodecOptions{})
	for _, tc := range []struct {
		name    string
		payload *commonpb.Payload
		offload bool
	}{
		{"small", jsonPayload(t, 100), false},
		{"empty", &commonpb.Payload{}, false},
		{"large", jsonPayload(t, 64<<10), true},
		{"large binary with metadata", &commonpb.Payload{
			Metadata: map[string][]byte{"encoding": []byte("binary/plain"), "a": []byte("1"), "b": []byte("2")},
			Data:     []byte(strings.Repeat("\x00\xff", 10<<10)),
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			encoded, err := c.Encode([]*commonpb.Payload{tc.payload})
			require.NoError(t, err)
			require.Len(t, encoded, 1)
			if !tc.offload {
				require.Same(t, tc.payload, encoded[0], "small payloads pass unchanged")
			} else {
				require.True(t, claimcheck.IsReference(encoded[0]))
				require.Less(t, proto.Size(encoded[0]), 200, "a reference is small")
				key, size, err := claimcheck.ParseReference(encoded[0])
				require.NoError(t, err)
				require.Equal(t, proto.Size(tc.payload), size)
				// A value of several chunks is named by its tree's root.
				if data := mustMarshal(t, tc.payload); len(chunks(data)) == 1 {
					require.Equal(t, claimcheck.KeyOf(data), key)
				} else {
					obj, err := c.store.Get(t.Context(), key)
					require.NoError(t, err)
					require.True(t, isNode(obj), "the reference names a tree node")
				}
			}
			decoded, err := c.Decode(encoded)
			require.NoError(t, err)
			require.Len(t, decoded, 1)
			require.True(t, proto.Equal(tc.payload, decoded[0]), "decode restores the payload")
		})
	}
}

func TestCodecThreshold(t *testing.T) {
	const threshold = 1000
	c := NewCodec(open(t, "mem://"), CodecOptions{Threshold: threshold})
	at := &commonpb.Payload{Data: make([]byte, 1)}
	for proto.Size(at) < threshold {
		at.Data = append(at.Data, 'x')
	}
	require.Equal(t, threshold, proto.Size(at))
	above := proto.Clone(at).(*commonpb.Payload)
	above.Data = append(above.Data, 'x')

	encoded, err := c.Encode([]*commonpb.Payload{at, above})
	require.NoError(t, err)
	require.Same(t, at, encoded[0], "a payload of exactly the threshold stays inline")
	require.True(t, claimcheck.IsReference(encoded[1]), "one byte more is offloaded")
}

func TestCodecDeterministic(t *testing.T) {
	c := NewCodec(open(t, "mem://"), CodecOptions{})
	build := func() *commonpb.Payload {
		p := jsonPayload(t, 8<<10)
		for _, k := range []string{"z", "y", "x", "w", "v"} {
			p.Metadata[k] = []byte(k)
		}
		return p
	}
	first, err := c.Encode([]*commonpb.Payload{build()})
	require.NoError(t, err)
	for range 5 {
		again, err := c.Encode([]*commonpb.Payload{build()})
		require.NoError(t, err)
		require.True(t, proto.Equal(first[0], again[0]), "the same payload gives the same reference")
	}
}

func TestCodecPassesReferencesAndMixedBatches(t *testing.T) {
	c := NewCodec(open(t, "mem://"), CodecOptions{})
	small, large := jsonPayload(t, 10), jsonPayload(t, 10<<10)
	encoded, err := c.Encode([]*commonpb.Payload{small, large, small})
	require.NoError(t, err)
	require.Same(t, small, encoded[0])
	require.True(t, claimcheck.IsReference(encoded[1]))
	require.Same(t, small, encoded[2])

	twice, err := c.Encode(encoded)
	require.NoError(t, err)
	require.Same(t, encoded[1], twice[1], "a reference is not offloaded again")

	decoded, err := c.Decode(encoded)
	require.NoError(t, err)
	require.Same(t, small, decoded[0])
	require.True(t, proto.Equal(large, decoded[1]))
	require.Same(t, small, decoded[2])
}

func TestPutPayloadAndReference(t *testing.T) {
	ctx := context.Background()
	s := open(t, "mem://")
	c := NewCodec(s, CodecOptions{})
	small := jsonPayload(t, 3)

	ref, err := c.PutPayload(ctx, small)
	require.NoError(t, err)
	require.True(t, claimcheck.IsReference(ref), "PutPayload offloads whatever the size")

	// A process holding only the key builds the same reference.
	data := mustMarshal(t, small)
	key, err := s.Put(ctx, data)
	require.NoError(t, err)
	require.True(t, proto.Equal(ref, claimcheck.Reference(key, len(data))))
	require.Equal(t, `{"key":"`+string(key)+`","size":`+strconv.Itoa(len(data))+`}`, string(ref.Data))
	require.Equal(t, map[string][]byte{"encoding": []byte(claimcheck.EncodingClaimCheck)}, ref.Metadata)

	decoded, err := c.Decode([]*commonpb.Payload{claimcheck.Reference(key, len(data))})
	require.NoError(t, err)
	require.True(t, proto.Equal(small, decoded[0]))
}

func TestCodecFailures(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, "mem://")
	require.NoError(t, err)
	c := NewCodec(s, CodecOptions{})
	ref, err := c.PutPayload(ctx, jsonPayload(t, 1))
	require.NoError(t, err)

	_, err = c.Decode([]*commonpb.Payload{claimcheck.Reference(claimcheck.KeyOf([]byte("gone")), 10)})
	require.ErrorIs(t, err, ErrNotFound)

	bad := claimcheck.Reference("sha256:nope", 1)
	_, err = c.Decode([]*commonpb.Payload{bad})
	require.ErrorIs(t, err, ErrInvalidReference)

	notPayload, err := s.Put(ctx, []byte{0xff, 0xff, 0xff})
	require.NoError(t, err)
	_, err = c.Decode([]*commonpb.Payload{claimcheck.Reference(notPayload, 3)})
	require.ErrorIs(t, err, ErrInvalidReference)

	require.NoError(t, s.Close())
	_, err = c.Encode([]*commonpb.Payload{jsonPayload(t, 10<<10)})
	require.ErrorIs(t, err, ErrUnreachable, "a value is never passed through when the store fails")
	_, err = c.Decode([]*commonpb.Payload{ref})
	require.ErrorIs(t, err, ErrUnreachable)
}

func TestDataConverter(t *testing.T) {
	dc := NewDataConverter(NewCodec(open(t, "mem://"), CodecOptions{}))
	value := strings.Repeat("long answer ", 1000)
	p, err := dc.ToPayload(value)
	require.NoError(t, err)
	require.True(t, claimcheck.IsReference(p))
	var got string
	require.NoError(t, dc.FromPayload(p, &got))
	require.Equal(t, value, got)
}

func mustMarshal(t *testing.T, p *commonpb.Payload) []byte {
	t.Helper()
	b, err := marshal.Marshal(p)
	require.NoError(t, err)
	return b
}
