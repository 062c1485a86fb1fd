package provider_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
)

// A key in a form Sanitize's patterns do not know (here an Azure-style hex
// key) is redacted by value: whole, and when the message was cut inside it.
func TestRedactSecret(t *testing.T) {
	const key = "3f9a1c0b7e2d4a6f8b1c3e5d7f9a0b2c"
	for _, tc := range []struct {
		name string
		in   error
		want string
	}{
		{"provider error", &keel.ProviderError{Provider: "openai", Kind: keel.ProviderAuth,
			Message: "Access denied due to invalid subscription key " + key + ". Make sure..."},
			"Access denied due to invalid subscription key [redacted]. Make sure..."},
		{"cut inside the key", &keel.ProviderError{Provider: "openai", Kind: keel.ProviderAuth,
			Message: "invalid key " + key[:12] + "…"}, "invalid key [redacted]…"},
		{"malformed", &provider.MalformedError{Reason: "chunk echoes " + key}, "chunk echoes [redacted]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := provider.RedactSecret(tc.in, key)
			if strings.Contains(got.Error(), key[:minLen]) || !strings.Contains(got.Error(), tc.want) {
				t.Fatalf("got %q, want it to hold %q and no part of the key", got.Error(), tc.want)
			}
			if tc.in.Error() == got.Error() {
				t.Fatal("the original error was changed in place or nothing was redacted")
			}
		})
	}
	// Nothing to redact: the same error comes back, its kind intact.
	pe := &keel.ProviderError{Provider: "openai", Kind: keel.ProviderRateLimited, Message: "slow down"}
	if got := provider.RedactSecret(pe, key); got != error(pe) {
		t.Fatalf("got %v, want the error itself", got)
	}
	if got := provider.RedactSecret(context.Canceled, key); !errors.Is(got, context.Canceled) {
		t.Fatalf("got %v", got)
	}
	// A short "key" would redact words: left alone.
	short := &keel.ProviderError{Message: "the model is busy"}
	if got := provider.RedactSecret(short, "model"); got.Error() != short.Error() {
		t.Fatalf("a 5-byte secret redacted %q", got.Error())
	}
}

const minLen = 8

func TestWithoutSecretRedactsTheStreamsError(t *testing.T) {
	const key = "3f9a1c0b7e2d4a6f8b1c3e5d7f9a0b2c"
	seq := iter.Seq2[provider.Chunk, error](func(yield func(provider.Chunk, error) bool) {
		if !yield(provider.Chunk{Text: "hi"}, nil) {
			return
		}
		yield(provider.Chunk{}, &keel.ProviderError{Kind: keel.ProviderAuth, Message: "bad key " + key})
	})
	var text string
	var last error
	for c, err := range provider.WithoutSecret(seq, key) {
		text += c.Text
		last = err
	}
	var pe *keel.ProviderError
	if text != "hi" || !errors.As(last, &pe) || pe.Kind != keel.ProviderAuth || strings.Contains(pe.Message, key) {
		t.Fatalf("text %q, error %v", text, last)
	}
}
