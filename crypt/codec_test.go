package crypt_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/keelrun/keel/crypt"
)

func keyring(t *testing.T, lines ...string) *crypt.Keyring {
	t.Helper()
	r, err := crypt.ParseKeyFile("test-keys", []byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var (
	keyA = "a " + b64(32, 'A')
	keyB = "b " + b64(32, 'B')
)

func TestCodecRoundTrip(t *testing.T) {
	c := crypt.NewCodec(keyring(t, keyA))
	dc := converter.GetDefaultDataConverter()
	const marker = "the secret prompt 7f3a"
	in, err := dc.ToPayloads(marker, map[string]int{"n": 1}, nil, []byte("raw"))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := c.Encode(in.Payloads)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range enc {
		if !crypt.IsEncrypted(p) || crypt.KeyID(p) != "a" {
			t.Fatalf("payload %d not encrypted with a: %v", i, p.GetMetadata())
		}
		if bytes.Contains(p.GetData(), []byte("secret")) || bytes.Contains(p.GetData(), []byte("json/plain")) {
			t.Fatalf("payload %d shows its plaintext", i)
		}
	}
	// Equal values encrypt differently: the nonce is random.
	again, _ := c.Encode(in.Payloads[:1])
	if bytes.Equal(again[0].GetData(), enc[0].GetData()) {
		t.Fatal("two encryptions of one payload are equal")
	}
	// Encrypted payloads pass Encode.
	twice, err := c.Encode(enc)
	if err != nil || !cmp.Equal(enc, twice, protocmp.Transform()) {
		t.Fatalf("Encode of encrypted payloads changed them (%v)", err)
	}
	dec, err := c.Decode(append(enc, nil))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(append(in.Payloads, nil), dec, protocmp.Transform()); diff != "" {
		t.Fatalf("Decode (-want +got):\n%s", diff)
	}
}

// The attack: whoever can write to Temporal without the keys hands a
// worker a payload of their own (temporal workflow signal --input
// '{"text":"x"}'). Decode refuses it with ErrPlaintext, naming its
// encoding and size, never its data; a batch with one such payload
// fails whole. AllowPlaintext, for a deployment switching encryption on,
// lets it through unchanged.
func TestCodecRefusesPlaintext(t *testing.T) {
	keys := keyring(t, keyA)
	strict := crypt.NewCodec(keys)
	if strict.AllowsPlaintext() {
		t.Fatal("a new codec allows plaintext")
	}
	plain, _ := converter.GetDefaultDataConverter().ToPayload(map[string]string{"text": "FORGED-7c1d"})
	enc, err := strict.Encode([]*commonpb.Payload{plain})
	if err != nil {
		t.Fatal(err)
	}
	noEncoding := &commonpb.Payload{Data: []byte("FORGED-7c1d")}
	for name, batch := range map[string][]*commonpb.Payload{
		"alone": {plain}, "after ciphertext": {enc[0], plain}, "no encoding": {noEncoding},
	} {
		out, err := strict.Decode(batch)
		if !errors.Is(err, crypt.ErrPlaintext) || out != nil {
			t.Errorf("%s: Decode = %v, %v; want ErrPlaintext", name, out, err)
			continue
		}
		if strings.Contains(err.Error(), "FORGED") {
			t.Errorf("%s: the error shows the payload's data: %v", name, err)
		}
	}
	_, err = strict.Decode([]*commonpb.Payload{plain})
	if !strings.Contains(err.Error(), `"json/plain"`) {
		t.Errorf("the error does not name the encoding: %v", err)
	}

	lenient := crypt.NewCodec(keys, crypt.AllowPlaintext())
	if !lenient.AllowsPlaintext() {
		t.Fatal("AllowPlaintext did not take")
	}
	dec, err := lenient.Decode([]*commonpb.Payload{enc[0], plain})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]*commonpb.Payload{plain, plain}, dec, protocmp.Transform()); diff != "" {
		t.Fatalf("Decode with AllowPlaintext (-want +got):\n%s", diff)
	}
}

// After a rotation the new key encrypts and the old one still decrypts;
// a keyring without the old key fails with ErrUnknownKey, naming the ID.
func TestCodecRotation(t *testing.T) {
	old := crypt.NewCodec(keyring(t, keyA))
	rotated := crypt.NewCodec(keyring(t, keyB, keyA))
	onlyNew := crypt.NewCodec(keyring(t, keyB))
	p, _ := converter.GetDefaultDataConverter().ToPayload("before rotation")
	oldEnc, err := old.Encode([]*commonpb.Payload{p})
	if err != nil {
		t.Fatal(err)
	}
	newEnc, err := rotated.Encode([]*commonpb.Payload{p})
	if err != nil {
		t.Fatal(err)
	}
	if crypt.KeyID(newEnc[0]) != "b" {
		t.Fatalf("after rotation encrypted with %q", crypt.KeyID(newEnc[0]))
	}
	for name, enc := range map[string]*commonpb.Payload{"old": oldEnc[0], "new": newEnc[0]} {
		dec, err := rotated.Decode([]*commonpb.Payload{enc})
		if err != nil || !cmp.Equal(p, dec[0], protocmp.Transform()) {
			t.Fatalf("rotated keyring decodes the %s payload: %v", name, err)
		}
	}
	_, err = onlyNew.Decode([]*commonpb.Payload{oldEnc[0]})
	if !errors.Is(err, crypt.ErrUnknownKey) || !strings.Contains(err.Error(), `"a"`) {
		t.Fatalf("unknown key: %v", err)
	}
}

func TestCodecRejectsTampering(t *testing.T) {
	c := crypt.NewCodec(keyring(t, keyA, keyB))
	p, _ := converter.GetDefaultDataConverter().ToPayload("value")
	enc, _ := c.Encode([]*commonpb.Payload{p})
	flipped := &commonpb.Payload{Metadata: enc[0].Metadata, Data: bytes.Clone(enc[0].Data)}
	flipped.Data[len(flipped.Data)-1] ^= 1
	// Naming another key the file holds must not open the payload either:
	// the ID is authenticated.
	relabeled := &commonpb.Payload{Metadata: map[string][]byte{
		converter.MetadataEncoding: []byte(crypt.EncodingEncrypted), crypt.MetadataKeyID: []byte("b")}, Data: enc[0].Data}
	short := &commonpb.Payload{Metadata: enc[0].Metadata, Data: enc[0].Data[:5]}
	for name, bad := range map[string]*commonpb.Payload{"flipped": flipped, "relabeled": relabeled, "short": short} {
		if _, err := c.Decode([]*commonpb.Payload{bad}); !errors.Is(err, crypt.ErrDecrypt) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
