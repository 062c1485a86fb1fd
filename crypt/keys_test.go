package crypt_test

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel/crypt"
)

// b64 returns a standard-base64 key of n bytes, every byte b.
func b64(n int, b byte) string {
	return base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(rune(b)), n)))
}

func TestParseKeyFile(t *testing.T) {
	good := b64(32, 'a')
	r, err := crypt.ParseKeyFile("keys", []byte("# rotated 2026-12\n\nnew "+good+"\n  old "+b64(32, 'b')+"  \n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"new", "old"}, r.IDs()); diff != "" {
		t.Fatalf("IDs (-want +got):\n%s", diff)
	}
	if r.Current() != "new" {
		t.Fatalf("Current = %q", r.Current())
	}

	secret := b64(16, 's')
	for _, tc := range []struct {
		name, file string
		line       int
		want       error
	}{
		{"empty", "", 0, crypt.ErrKeyFile},
		{"comments only", "# nothing\n\n", 0, crypt.ErrKeyFile},
		{"one field", "k1\n", 1, crypt.ErrSyntax},
		{"three fields", "k1 " + good + " extra\n", 1, crypt.ErrSyntax},
		{"bad base64", "k1 " + good + "\nk2 not*base64!\n", 2, crypt.ErrBase64},
		{"short key", "k1 " + secret + "\n", 1, crypt.ErrKeyLength},
		{"long key", "k1 " + b64(33, 'x') + "\n", 1, crypt.ErrKeyLength},
		{"duplicate ID", "k1 " + good + "\n# again\nk1 " + b64(32, 'c') + "\n", 3, crypt.ErrDuplicateID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := crypt.ParseKeyFile("/etc/keel/keys", []byte(tc.file))
			var kfe *crypt.KeyFileError
			if !errors.As(err, &kfe) || !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want a KeyFileError wrapping %v", err, tc.want)
			}
			if kfe.File != "/etc/keel/keys" || kfe.Line != tc.line {
				t.Fatalf("error at %s:%d, want line %d", kfe.File, kfe.Line, tc.line)
			}
			if !strings.HasPrefix(err.Error(), "/etc/keel/keys") {
				t.Fatalf("message %q does not name the file first", err)
			}
			for _, k := range []string{good, secret, b64(32, 'c')} {
				if strings.Contains(err.Error(), k) {
					t.Fatalf("message %q holds a key", err)
				}
			}
		})
	}
}

func TestLoadKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	if _, err := crypt.LoadKeyFile(path); !errors.Is(err, crypt.ErrKeyFile) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if err := os.WriteFile(path, []byte("k1 "+b64(32, 'a')+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := crypt.LoadKeyFile(path)
	if err != nil || r.Current() != "k1" {
		t.Fatalf("LoadKeyFile = %v, %v", r, err)
	}
}
