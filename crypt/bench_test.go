package crypt_test

import (
	"crypto/rand"
	"fmt"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

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

// BenchmarkCodec measures one Encode and one Decode of a payload of each
// size, through the encryption codec and through a no-op codec in the
// same run; MB/s counts the payload's data.
func BenchmarkCodec(b *testing.B) {
	key := make([]byte, crypt.KeySize)
	_, _ = rand.Read(key)
	codecs := []struct {
		name  string
		codec converter.PayloadCodec
	}{{"nop", nopCodec{}}, {"aes-gcm", crypt.NewCodec(crypt.NewKeyring("bench", key))}}
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
