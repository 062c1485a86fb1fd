package store

import (
	"errors"

	"github.com/keelrun/keel/claimcheck"
)

// Sentinel errors. Every error the package returns wraps one of them (test
// with errors.Is) and, where there is one, the cause; its message names the
// store's URL without secrets and the key involved, so a log line alone
// says which value failed where. ErrInvalidKey, ErrUnreachable,
// ErrInvalidReference and ErrEndpoint are package claimcheck's values.
var (
	// ErrInvalidURL: Open was given a URL it cannot use (unknown scheme,
	// credentials embedded in the URL, a driver parameter it rejects).
	ErrInvalidURL = errors.New("store: invalid URL")
	// ErrInvalidKey: a key is not "sha256:" followed by 64 lowercase hex digits.
	ErrInvalidKey = claimcheck.ErrInvalidKey
	// ErrNotFound: no value is stored under the key.
	ErrNotFound = errors.New("store: not found")
	// ErrCorrupt: the bytes read do not hash to their key. Values are never
	// returned unverified, so a damaged object surfaces here rather than as
	// a wrong answer further on.
	ErrCorrupt = errors.New("store: corrupt value")
	// ErrUnreachable: the store (or a codec endpoint) could not be read or
	// written: network failure, missing bucket, denied access, a closed
	// Store, a timeout. The value was neither lost nor replaced; the caller
	// fails and may retry.
	ErrUnreachable = claimcheck.ErrUnreachable
	// ErrInvalidReference: a payload marked as a claim-check reference does
	// not hold a well-formed reference.
	ErrInvalidReference = claimcheck.ErrInvalidReference
	// ErrEndpoint: a remote codec endpoint answered, but with an error or
	// with payloads it had not decoded.
	ErrEndpoint = claimcheck.ErrEndpoint
)
