package crypt

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"unicode"
)

// KeySize is the length in bytes of a key: AES-256.
const KeySize = 32

// Keyring holds the keys of a key file: the current one, which Encode
// uses, and older ones that Decode still accepts.
type Keyring struct {
	ids  []string // file order; ids[0] is current
	keys map[string][]byte
}

// LoadKeyFile reads and parses the key file at path (see ParseKeyFile).
func LoadKeyFile(path string) (*Keyring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &KeyFileError{File: path, Err: fmt.Errorf("%w: %w", ErrKeyFile, err)}
	}
	return ParseKeyFile(path, data)
}

// ParseKeyFile parses a key file's contents; name is used in errors. Each
// line is "KEYID BASE64KEY": an ID of printable characters without spaces
// and a 32-byte key in standard base64. Blank lines and lines starting
// with # are skipped. The first key is the current one.
func ParseKeyFile(name string, data []byte) (*Keyring, error) {
	r := &Keyring{keys: map[string][]byte{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		lineErr := func(err error) error { return &KeyFileError{File: name, Line: n, Err: err} }
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, lineErr(fmt.Errorf("%w: want \"KEYID BASE64KEY\", got %d fields", ErrSyntax, len(fields)))
		}
		id := fields[0]
		if !printable(id) {
			return nil, lineErr(fmt.Errorf("%w: the key ID has unprintable characters", ErrSyntax))
		}
		key, err := base64.StdEncoding.DecodeString(fields[1])
		if err != nil {
			// base64's error says only where the bad byte is.
			return nil, lineErr(fmt.Errorf("%w: key %q: %w", ErrBase64, id, err))
		}
		if len(key) != KeySize {
			return nil, lineErr(fmt.Errorf("%w: key %q has %d bytes", ErrKeyLength, id, len(key)))
		}
		if _, dup := r.keys[id]; dup {
			return nil, lineErr(fmt.Errorf("%w: %q", ErrDuplicateID, id))
		}
		r.ids = append(r.ids, id)
		r.keys[id] = key
	}
	if err := sc.Err(); err != nil {
		return nil, &KeyFileError{File: name, Err: fmt.Errorf("%w: %w", ErrKeyFile, err)}
	}
	if len(r.ids) == 0 {
		return nil, &KeyFileError{File: name, Err: fmt.Errorf("%w: no key (want lines of \"KEYID BASE64KEY\")", ErrKeyFile)}
	}
	return r, nil
}

// NewKeyring returns a keyring of one current key, for tests and programs
// that keep keys elsewhere than in a file. It panics unless key is
// KeySize bytes and id is a valid key ID.
func NewKeyring(id string, key []byte) *Keyring {
	if len(key) != KeySize || id == "" || !printable(id) || strings.ContainsFunc(id, unicode.IsSpace) {
		panic("crypt: NewKeyring: want a printable ID without spaces and a 32-byte key")
	}
	return &Keyring{ids: []string{id}, keys: map[string][]byte{id: bytes.Clone(key)}}
}

// Current returns the ID of the key new payloads are encrypted with.
func (r *Keyring) Current() string { return r.ids[0] }

// IDs returns the key IDs, the current one first.
func (r *Keyring) IDs() []string { return append([]string(nil), r.ids...) }

func printable(s string) bool {
	for _, c := range s {
		if !unicode.IsPrint(c) {
			return false
		}
	}
	return true
}
