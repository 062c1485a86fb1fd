package claimcheck

import (
	"errors"
	"net/url"
	"strings"
)

// Sentinel errors. Package store returns the same values, so errors.Is
// works with either package's name.
var (
	// ErrInvalidKey: a key is not "sha256:" followed by 64 lowercase hex digits.
	ErrInvalidKey = errors.New("store: invalid key")
	// ErrUnreachable: the store (or a codec endpoint) could not be read or
	// written: network failure, missing bucket, denied access, a closed
	// Store, a timeout. The value was neither lost nor replaced; the caller
	// fails and may retry.
	ErrUnreachable = errors.New("store: unreachable")
	// ErrInvalidReference: a payload marked as a claim-check reference does
	// not hold a well-formed reference.
	ErrInvalidReference = errors.New("store: invalid claim-check reference")
	// ErrEndpoint: a remote codec endpoint answered, but with an error or
	// with payloads it had not decoded.
	ErrEndpoint = errors.New("store: codec endpoint failed")
)

// detailError carries a message of its own while unwrapping to a sentinel
// and a cause, for the few errors whose wording should not start with the
// sentinel's text.
type detailError struct {
	msg   string
	kind  error
	cause error
}

func (e *detailError) Error() string {
	if e.cause == nil {
		return e.msg
	}
	return e.msg + ": " + e.cause.Error()
}

func (e *detailError) Unwrap() []error { return []error{e.kind, e.cause} }

// SecretParam reports whether a URL query parameter looks like a
// credential. keel takes credentials from the environment or a profile
// only, so such a parameter is refused rather than passed on, and it is
// never written to a log.
func SecretParam(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"secret", "password", "token", "credential", "signature", "access_key"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// RedactURL returns u for logs and error messages: no user info and no
// credential-like query parameters.
func RedactURL(u *url.URL) string {
	c := *u
	c.User = nil
	q := c.Query()
	for name := range q {
		if SecretParam(name) {
			q.Del(name)
		}
	}
	c.RawQuery = q.Encode()
	return c.String()
}
