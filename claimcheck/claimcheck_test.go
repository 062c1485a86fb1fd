package claimcheck

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
)

func TestReferenceRoundTrip(t *testing.T) {
	key := KeyOf([]byte("a large value"))
	p := Reference(key, 13)
	if !IsReference(p) {
		t.Fatalf("Reference(%s) is not a reference: %v", key, p.GetMetadata())
	}
	if got := string(p.GetData()); got != `{"key":"`+string(key)+`","size":13}` {
		t.Fatalf("reference data %s", got)
	}
	k, size, err := ParseReference(p)
	if err != nil || k != key || size != 13 {
		t.Fatalf("ParseReference = %s, %d, %v", k, size, err)
	}
}

func TestMalformedReferencesAndKeys(t *testing.T) {
	plain := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`1`)}
	if _, _, err := ParseReference(plain); !errors.Is(err, ErrInvalidReference) {
		t.Fatalf("plain payload: %v", err)
	}
	bad := Reference(Key("sha256:../../etc/passwd"), 1)
	if _, _, err := ParseReference(bad); !errors.Is(err, ErrInvalidReference) || !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("bad key: %v", err)
	}
	for _, s := range []string{"", "sha256:", "md5:" + strings.Repeat("0", 64), "sha256:" + strings.Repeat("A", 64), "sha256:" + strings.Repeat("g", 64)} {
		if _, err := ParseKey(s); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ParseKey(%q) = %v", s, err)
		}
	}
}

func TestRedactURL(t *testing.T) {
	u, _ := url.Parse("https://user:pw@codec.example/codec?token=t0p&region=eu")
	got := RedactURL(u)
	if strings.Contains(got, "pw") || strings.Contains(got, "t0p") || !strings.Contains(got, "region=eu") {
		t.Fatalf("RedactURL = %s", got)
	}
}
