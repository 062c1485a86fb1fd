package provider

import (
	"iter"
	"strings"

	"github.com/keelrun/keel"
)

// minSecretLen is the shortest configured key RedactSecret looks for:
// shorter strings would redact ordinary words.
const minSecretLen = 8

// redacted replaces a configured key in provider text.
const redacted = "[redacted]"

// RedactSecret returns err with every occurrence of secret in its text
// replaced by "[redacted]", so that a backend that echoes its configured
// key in a form Sanitize's patterns do not know (an Azure key, a
// self-hosted gateway's token) still never puts it in an event, history or
// log. A message cut short in the middle of the key loses the part it
// kept. Errors of other types, and secrets shorter than 8 bytes, are
// returned as they are.
func RedactSecret(err error, secret string) error {
	if err == nil || len(secret) < minSecretLen {
		return err
	}
	switch e := err.(type) {
	case *keel.ProviderError:
		if msg := redactIn(e.Message, secret); msg != e.Message {
			c := *e
			c.Message = msg
			return &c
		}
	case *MalformedError:
		if reason := redactIn(e.Reason, secret); reason != e.Reason {
			return &MalformedError{Reason: reason}
		}
	}
	return err
}

// redactIn replaces secret in s, and a prefix of it (minSecretLen bytes or
// more) that s ends with: Sanitize cuts long messages, and the cut may
// fall inside the key.
func redactIn(s, secret string) string {
	s = strings.ReplaceAll(s, secret, redacted)
	trimmed := strings.TrimSuffix(s, "…")
	for n := len(secret) - 1; n >= minSecretLen; n-- {
		if strings.HasSuffix(trimmed, secret[:n]) {
			return trimmed[:len(trimmed)-n] + redacted + s[len(trimmed):]
		}
	}
	return s
}

// WithoutSecret passes seq through, its error (if any) with secret
// redacted (RedactSecret). Providers wrap their streams with their own
// key.
func WithoutSecret(seq iter.Seq2[Chunk, error], secret string) iter.Seq2[Chunk, error] {
	if len(secret) < minSecretLen {
		return seq
	}
	return func(yield func(Chunk, error) bool) {
		for c, err := range seq {
			if !yield(c, RedactSecret(err, secret)) {
				return
			}
		}
	}
}
