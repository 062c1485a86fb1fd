// # Webhooks and HTTP sinks
//
// A webhook (NewWebhook) is a hook an HTTP endpoint serves. Each call is
// a POST of the Call as JSON, with the headers
//
//	Content-Type: application/json
//	Idempotency-Key: <Call.Key, the same on every attempt of the call>
//	Keel-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
//
// The endpoint answers 2xx with a Decision as JSON (unknown fields are
// ignored), or 204 or an empty body to let the run go on. A call is
// bounded by Spec.CallTimeout, and ends (keel.CodeCancelled) when its
// context is cancelled. What fails is a *keel.Error, code
// keel.CodeHookFailed unless said: retryable are a connection error, a
// timeout, 408, 429 and 5xx; not retryable are other statuses, a
// redirect (never followed, to any host), an answer over
// MaxResponseBytes (keel.CodeTooLarge), and invalid JSON. (Whether the point
// takes the decision, and its size, the worker checks where it is used,
// against the run's limits: Decision.Check.) Messages name the hook and what went wrong, never
// the URL, the secret or the answer.
//
// An HTTP sink (NewHTTPSink) POSTs each delivery as
// {"session_id": "...", "events": [envelope, ...]}, signed the same way,
// with the headers Keel-Session: <session ID> and Idempotency-Key:
// <session ID>:<first seq>-<last seq>. A 2xx answer is a delivery;
// anything else, a redirect or a timeout is a retryable failure, and the
// delivery is made again. At most MaxSinkResponseBytes of the answer are
// read.
//
// A receiver verifies every request with Verify (or the same HMAC in its
// own language) and refuses an old time: that is a replayed request.
package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/keelrun/keel"
)

// MaxResponseBytes bounds a webhook's answer; a longer one is refused,
// code keel.CodeTooLarge.
const MaxResponseBytes = 1 << 20

// IdempotencyKeyHeader carries Call.Key on a webhook's request (and a
// delivery's key on an HTTP sink's): the same on every attempt.
const IdempotencyKeyHeader = "Idempotency-Key"

// WebhookConfig configures a webhook: a hook an HTTP endpoint of the
// operator's serves.
type WebhookConfig struct {
	// URL receives the calls: https, or http to a loopback host
	// (CheckURL).
	URL string
	// Secret signs every request (Keel-Signature). Required.
	Secret []byte
	// Spec says where the hook runs, how long one call may take and what
	// its failure does.
	Spec Spec
	// Transport sends the requests. Optional: http.DefaultTransport.
	Transport http.RoundTripper
}

// Webhook is a hook served over HTTP: each call is a signed POST of the
// Call as JSON, answered with a Decision (the package doc has the wire
// format).
type Webhook struct {
	spec Spec
	ep   endpoint
}

var _ Hook = (*Webhook)(nil)

// NewWebhook checks cfg and returns its webhook. The errors never repeat
// the URL or the secret.
func NewWebhook(cfg WebhookConfig) (*Webhook, error) {
	if err := cfg.Spec.Validate(); err != nil {
		return nil, errors.New("hook: " + err.Error())
	}
	ep, err := newEndpoint(cfg.URL, cfg.Secret, cfg.Transport)
	if err != nil {
		return nil, err
	}
	return &Webhook{spec: cfg.Spec, ep: ep}, nil
}

// Spec returns the webhook's spec.
func (w *Webhook) Spec() Spec { return w.spec }

// Call posts c and reads the decision. A failure is a *keel.Error whose
// message names the hook and what went wrong, never the URL, the secret
// or what the endpoint answered.
func (w *Webhook) Call(ctx context.Context, c Call) (Decision, error) {
	who := "hook " + c.Hook
	body, err := json.Marshal(c)
	if err != nil {
		return Decision{}, &keel.Error{Code: keel.CodeInvalidInput, Message: who + ": the call is not expressible as JSON"}
	}
	timeout := w.spec.CallTimeout()
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	resp, err := w.ep.post(ctx, body, http.Header{IdempotencyKeyHeader: {c.Key}})
	if err != nil {
		return Decision{}, transportError(ctx, who, timeout)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Decision{}, statusError(who, resp.StatusCode, false)
	}
	// One byte past the limit tells a long answer from one just at it.
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return Decision{}, transportError(ctx, who, timeout)
	}
	if len(data) > MaxResponseBytes {
		return Decision{}, &keel.Error{Code: keel.CodeTooLarge, Message: who + ": response over 1 MiB"}
	}
	var d Decision
	if resp.StatusCode == http.StatusNoContent || len(bytes.TrimSpace(data)) == 0 {
		return d, nil
	}
	if json.Unmarshal(data, &d) != nil {
		return Decision{}, failure(false, "%s: invalid JSON response", who)
	}
	return d, nil
}
