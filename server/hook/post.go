package hook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/keelrun/keel"
)

// Errors of CheckURL.
var (
	ErrURL            = errors.New("hook: want an absolute https URL, or http to localhost or a loopback IP")
	ErrURLCredentials = errors.New("hook: a URL must not hold credentials (user:password@)")
)

// CheckURL checks where a webhook or an HTTP sink may post: an absolute
// https URL, or plain http to localhost or a loopback IP only, since the
// requests carry prompts, tool calls and their results. Credentials in a
// URL are refused: they would land in logs. The errors never repeat the
// URL.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return ErrURL
	}
	if u.User != nil {
		return ErrURLCredentials
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := strings.ToLower(u.Hostname())
		if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
			return nil
		}
	}
	return ErrURL
}

// endpoint posts signed JSON to one URL: the half a webhook and an HTTP
// sink share. It never follows a redirect, to any host: the request's
// body and signature go only where the operator said.
type endpoint struct {
	url    string
	secret []byte
	client *http.Client
}

func newEndpoint(rawURL string, secret []byte, rt http.RoundTripper) (endpoint, error) {
	if err := CheckURL(rawURL); err != nil {
		return endpoint{}, err
	}
	if len(secret) == 0 {
		return endpoint{}, ErrNoSecret
	}
	if rt == nil {
		rt = http.DefaultTransport
	}
	client := &http.Client{
		Transport: rt,
		// The 3xx comes back as the response, and is refused there.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return endpoint{url: rawURL, secret: bytes.Clone(secret), client: client}, nil
}

// post sends body with header, signed now. The caller closes the
// response's body.
func (e endpoint) post(ctx context.Context, body []byte, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, Sign(e.secret, time.Now(), body))
	return e.client.Do(req)
}

// errCallTimeout is the cause of a call's own deadline, told apart from
// a deadline of the caller's.
var errCallTimeout = errors.New("hook: call timed out")

// withTimeout bounds a call by d.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, errCallTimeout)
}

// transportError is the sanitized failure of a request that got no
// usable answer (err from sending it or reading its body, under ctx from
// withTimeout): who failed and how, never the URL, which err's text
// holds.
func transportError(ctx context.Context, who string, timeout time.Duration) *keel.Error {
	switch {
	case context.Cause(ctx) == errCallTimeout:
		return failure(true, "%s: timed out after %s", who, timeout)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return failure(true, "%s: timed out", who)
	case ctx.Err() != nil:
		return &keel.Error{Code: keel.CodeCancelled, Message: who + ": cancelled"}
	}
	return failure(true, "%s: connection failed", who)
}

// statusError is the sanitized failure of a non-2xx answer. 429 and 5xx
// are retryable, a redirect and other statuses not unless retryAll.
func statusError(who string, status int, retryAll bool) *keel.Error {
	retryable := retryAll || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout || status >= 500
	if status >= 300 && status < 400 {
		return failure(retryable, "%s: redirect refused (status %d)", who, status)
	}
	return failure(retryable, "%s: answered status %d", who, status)
}

func failure(retryable bool, format string, args ...any) *keel.Error {
	return &keel.Error{Code: keel.CodeHookFailed, Message: fmt.Sprintf(format, args...), Retryable: retryable}
}
