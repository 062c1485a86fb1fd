package crypt_test

import (
	"crypto/rand"
	"fmt"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/keelrun/keel/crypt"
)

// nopCodec is the baseline: a codec that copies the slice and nothing else,
// as the chain's bookkeeping does.
type nopCodec struct{}

func (nopCodec) Encode(p []*commonpb.Payload) ([]*commonpb.Payload, error) {
	return append([]*commonpb.Payload(nil), p...), nil
}
func (nopCodec) Decode(p []*commonpb.Payload) ([]*commonpb.Payload, error) {
	return append([]*commonpb.Payload(nil), p...), nil
}

// protoCodec does the copying the encryption codec does (marshal the
// payload, wrap it, unmarshal it back) without the cipher, to tell the
// cipher's share of the cost from the copies'.
type protoCodec struct{}

func (protoCodec) Encode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(ps))
	for i, p := range ps {
		data, err := proto.Marshal(p)
		if err != nil {
			return nil, err
		}
		out[i] = &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte("binary/wrapped")}, Data: data}
	}
	return out, nil
}

func (protoCodec) Decode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(ps))
	for i, p := range ps {
		out[i] = &commonpb.Payload{}
		if err := proto.Unmarshal(p.GetData(), out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// BenchmarkCodec measures one Encode and one Decode of a payload of each
// size, through the encryption codec and through a no-op codec in the
// same run, and through protoCodec (the same copies without the
// cipher); MB/s counts the payload's data.
func BenchmarkCodec(b *testing.B) {
	key := make([]byte, crypt.KeySize)
	_, _ = rand.Read(key)
	codecs := []struct {
		name  string
		codec converter.PayloadCodec
	}{{"nop", nopCodec{}}, {"proto", protoCodec{}}, {"aes-gcm", crypt.NewCodec(crypt.NewKeyring("bench", key))}}
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		data := make([]byte, size)
		_, _ = rand.Read(data)
		p := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte("binary/plain")}, Data: data}
		for _, c := range codecs {
			b.Run(fmt.Sprintf("%s/%dKiB", c.name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					enc, err := c.codec.Encode([]*commonpb.Payload{p})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := c.codec.Decode(enc); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
