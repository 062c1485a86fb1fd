package keel_test

import (
	"errors"
	"testing"

	"github.com/keelrun/keel"
)

func TestErrorsCompareByCode(t *testing.T) {
	err := error(&keel.Error{Code: keel.CodeCancelled, Message: "stopped by the user"})
	if !errors.Is(err, keel.ErrCancelled) || errors.Is(err, keel.ErrMaxSteps) {
		t.Errorf("errors.Is by code failed for %v", err)
	}
	pe := &keel.ProviderError{Provider: "openai", Kind: keel.ProviderRateLimited, Status: 429, Retryable: true}
	wrapped := error(&keel.Error{Code: keel.CodeProvider, Message: pe.Error(), Provider: pe})
	var got *keel.ProviderError
	if !errors.As(wrapped, &got) || got.Kind != keel.ProviderRateLimited {
		t.Errorf("errors.As did not find the provider error in %v", wrapped)
	}
	if (keel.Outcome{Status: keel.StatusCancelled}).Err() != keel.ErrCancelled {
		t.Error("a cancelled outcome must return ErrCancelled")
	}
	if (keel.Outcome{Status: keel.StatusCompleted}).Err() != nil {
		t.Error("a completed outcome has no error")
	}
}
