package hook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader carries the signature of a webhook's or an HTTP sink's
// request: "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>".
const SignatureHeader = "Keel-Signature"

// SignatureTolerance is how far a signature's time may be from the
// receiver's clock, when Verify is given no tolerance. It bounds how long
// a captured request can be replayed.
const SignatureTolerance = 5 * time.Minute

// Errors of Verify.
var (
	ErrSignatureHeader   = errors.New("hook: malformed Keel-Signature header")
	ErrSignatureMismatch = errors.New("hook: signature does not match")
	ErrSignatureExpired  = errors.New("hook: signature time outside the tolerance")
	ErrNoSecret          = errors.New("hook: a signing secret is required")
)

// Sign returns the Keel-Signature header of body, sent at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

// Verify checks a Keel-Signature header against body, for a receiver: a
// signature made with secret over this body, at a time within tolerance
// of now (0: SignatureTolerance). A receiver should verify every request
// and refuse what fails: an old time is a replayed request. Schemes other
// than v1 are ignored, and any v1 that matches will do, so a sender may
// sign with an old and a new secret while the secret rotates.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if len(secret) == 0 {
		return ErrNoSecret
	}
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrSignatureHeader
		}
		switch k {
		case "t":
			if ts != "" {
				return ErrSignatureHeader
			}
			ts = v
		case "v1":
			sig, err := hex.DecodeString(v)
			if err != nil || len(sig) != sha256.Size {
				return ErrSignatureHeader
			}
			sigs = append(sigs, sig)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrSignatureHeader
	}
	want := mac(secret, ts, body)
	matched := false
	for _, sig := range sigs {
		matched = matched || hmac.Equal(sig, want)
	}
	if !matched {
		return ErrSignatureMismatch
	}
	if tolerance <= 0 {
		tolerance = SignatureTolerance
	}
	// Checked after the MAC, so "expired" means a genuine request, late.
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrSignatureExpired
	}
	return nil
}

func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}
