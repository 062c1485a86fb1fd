package crypt

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns wraps one of them (test
// with errors.Is); none holds key material.
var (
	// ErrKeyFile: a key file could not be read or has no key.
	ErrKeyFile = errors.New("crypt: key file")
	// ErrSyntax: a key file line is not "KEYID BASE64KEY".
	ErrSyntax = errors.New("crypt: malformed key line")
	// ErrBase64: a key is not standard base64.
	ErrBase64 = errors.New("crypt: key is not base64")
	// ErrKeyLength: a key does not decode to 32 bytes (AES-256).
	ErrKeyLength = errors.New("crypt: key is not 32 bytes")
	// ErrDuplicateID: two keys of one file have the same ID.
	ErrDuplicateID = errors.New("crypt: duplicate key ID")
	// ErrUnknownKey: an encrypted payload names a key ID the keyring does
	// not hold (a key removed too early, or another deployment's payload).
	ErrUnknownKey = errors.New("crypt: unknown key ID")
	// ErrDecrypt: a payload's ciphertext does not open under its key: it
	// was altered, or a different key was given the same ID.
	ErrDecrypt = errors.New("crypt: cannot decrypt payload")
	// ErrPlaintext: a payload to decode is not encrypted, and the codec
	// accepts only ciphertext (a payload written by someone without the
	// keys, such as `temporal workflow signal --input`). AllowPlaintext
	// lets such payloads through, for a deployment switching encryption
	// on.
	ErrPlaintext = errors.New("crypt: payload is not encrypted")
)

// KeyFileError is a problem with one line of a key file (Line 0: the file
// as a whole). Its message names the file and the line, never the key.
type KeyFileError struct {
	File string
	Line int
	Err  error // one of the sentinels above, possibly wrapped
}

func (e *KeyFileError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *KeyFileError) Unwrap() error { return e.Err }
