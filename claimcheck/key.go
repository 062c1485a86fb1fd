package claimcheck

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Key names a stored value by its content: "sha256:" followed by the
// lowercase hex SHA-256 of the bytes. Equal bytes always get the same key,
// which is what makes Put idempotent and the codec deterministic.
type Key string

const keyScheme = "sha256:"

// KeyOf returns the key data is stored under, without storing it.
func KeyOf(data []byte) Key {
	sum := sha256.Sum256(data)
	return Key(keyScheme + hex.EncodeToString(sum[:]))
}

// ParseKey checks that s is a well-formed key. Keys arrive from outside the
// package (reference payloads, workflow state), and a malformed one must not
// become an arbitrary object path.
func ParseKey(s string) (Key, error) {
	digest, ok := strings.CutPrefix(s, keyScheme)
	if !ok || len(digest) != 2*sha256.Size || strings.ToLower(digest) != digest {
		return "", fmt.Errorf("%w: %q", ErrInvalidKey, s)
	}
	if _, err := hex.DecodeString(digest); err != nil {
		return "", fmt.Errorf("%w: %q", ErrInvalidKey, s)
	}
	return Key(s), nil
}

// String returns the key's text.
func (k Key) String() string { return string(k) }

// Digest returns the hex digest of a key that has passed ParseKey.
func (k Key) Digest() string { return strings.TrimPrefix(string(k), keyScheme) }
