package hook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/keelrun/keel"
)

// SessionHeader names the session of an HTTP sink's delivery.
const SessionHeader = "Keel-Session"

// MaxSinkResponseBytes is as much of a sink's answer as is read (and
// thrown away, so the connection can serve the next delivery).
const MaxSinkResponseBytes = 64 << 10

// HTTPSinkConfig configures an HTTP sink.
type HTTPSinkConfig struct {
	// Name names the sink in its errors. Optional: "http".
	Name string
	// URL receives the deliveries: https, or http to a loopback host
	// (CheckURL).
	URL string
	// Secret signs every request (Keel-Signature). Required.
	Secret []byte
	// Timeout bounds one delivery. Optional: DefaultTimeout; at most
	// MaxTimeout.
	Timeout time.Duration
	// Transport sends the requests. Optional: http.DefaultTransport.
	Transport http.RoundTripper
}

// HTTPSink is a sink that POSTs each delivery, signed, to an endpoint of
// the operator's (the package doc has the wire format).
type HTTPSink struct {
	who     string
	timeout time.Duration
	ep      endpoint
}

var _ Sink = (*HTTPSink)(nil)

// NewHTTPSink checks cfg and returns its sink. The errors never repeat
// the URL or the secret.
func NewHTTPSink(cfg HTTPSinkConfig) (*HTTPSink, error) {
	if cfg.Timeout < 0 || cfg.Timeout > MaxTimeout {
		return nil, fmt.Errorf("hook: sink timeout: want up to %s, not %s", MaxTimeout, cfg.Timeout)
	}
	ep, err := newEndpoint(cfg.URL, cfg.Secret, cfg.Transport)
	if err != nil {
		return nil, err
	}
	name := cfg.Name
	if name == "" {
		name = "http"
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	return &HTTPSink{who: "sink " + name, timeout: timeout, ep: ep}, nil
}

// delivery is the body of an HTTP sink's request.
type delivery struct {
	SessionID string          `json:"session_id"`
	Events    []keel.Envelope `json:"events"`
}

// Deliver posts events and succeeds on a 2xx answer. Every failure is a
// retryable *keel.Error whose message names the sink and what went
// wrong, never the URL, the secret or what the endpoint answered.
func (s *HTTPSink) Deliver(ctx context.Context, sessionID string, events []keel.Envelope) error {
	if len(events) == 0 {
		return nil
	}
	body, err := json.Marshal(delivery{SessionID: sessionID, Events: events})
	if err != nil {
		return failure(false, "%s: the events are not expressible as JSON", s.who)
	}
	// A retry of this delivery carries the same key: the same first and
	// last event.
	key := fmt.Sprintf("%s:%d-%d", sessionID, events[0].Seq, events[len(events)-1].Seq)
	ctx, cancel := withTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.ep.post(ctx, body, http.Header{IdempotencyKeyHeader: {key}, SessionHeader: {sessionID}})
	if err != nil {
		return transportError(ctx, s.who, s.timeout)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxSinkResponseBytes))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return statusError(s.who, resp.StatusCode, true)
	}
	return nil
}
