package connect

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc/codes"
)

// Causes of a failed connection that DialError.Cause names, when a probe of
// the server found them. Check with errors.Is.
var (
	ErrTLSRequired        = errors.New("the server speaks TLS and this client does not")
	ErrNotTLS             = errors.New("the server does not speak TLS")
	ErrUnknownAuthority   = errors.New("the server's certificate is not signed by a CA this client trusts")
	ErrServerName         = errors.New("the server's certificate is not issued for the name this client expects")
	ErrServerCertInvalid  = errors.New("the server's certificate is not valid")
	ErrClientCertRequired = errors.New("the server requires a client certificate")
	ErrClientCertRefused  = errors.New("the server refused the client certificate")
	ErrUnauthenticated    = errors.New("the server refused this client's credentials")
)

// hints say what to do about each cause, in the CLI's flags and the
// environment variables they stand for.
var hints = map[error]string{
	ErrTLSRequired: "turn TLS on with --tls (TEMPORAL_TLS=true), and unless a public CA signs " +
		"its certificate name that CA with --tls-ca-path (TEMPORAL_TLS_SERVER_CA_CERT_PATH)",
	ErrNotTLS:           "turn TLS off with --tls=false (TEMPORAL_TLS=false), or check the address",
	ErrUnknownAuthority: "name the CA that signs it with --tls-ca-path (TEMPORAL_TLS_SERVER_CA_CERT_PATH)",
	ErrServerName:       "name the host it is issued for with --tls-server-name (TEMPORAL_TLS_SERVER_NAME)",
	ErrClientCertRequired: "give one with --tls-cert-path and --tls-key-path " +
		"(TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH)",
	ErrClientCertRefused: "it must be signed by a CA the server trusts for clients " +
		"(--tls-cert-path, TEMPORAL_TLS_CLIENT_CERT_PATH)",
	ErrUnauthenticated: "check the API key (--api-key, TEMPORAL_API_KEY), the client certificate and the namespace",
}

// DialError is a failure to connect to Temporal.
type DialError struct {
	// Address dialed.
	Address string
	// Cause is one of the Err* causes above when a probe found it, else nil.
	Cause error
	// Detail is what the probe saw (an x509 error), if anything.
	Detail error
	// Err is the Temporal SDK's error.
	Err error
}

func (e *DialError) Error() string {
	if e.Cause == nil {
		return fmt.Sprintf("connect to Temporal at %s: %v", e.Address, e.Err)
	}
	msg := fmt.Sprintf("connect to Temporal at %s: %v", e.Address, e.Cause)
	if e.Detail != nil {
		msg += fmt.Sprintf(" (%v)", e.Detail)
	}
	if h := hints[e.Cause]; h != "" {
		msg += ": " + h
	}
	return msg
}

// Unwrap returns the cause, if found, and the SDK's error.
func (e *DialError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Cause, e.Err}
}

// probeTimeout bounds the probe that looks for the cause of a failed dial.
const probeTimeout = 3 * time.Second

// diagnose wraps the SDK's dial error in a *DialError, with its cause when a
// TLS handshake of its own can tell it: gRPC reports a failed handshake as
// an unavailable server, and retries it until the deadline.
func diagnose(ctx context.Context, opts client.Options, dialErr error) error {
	e := &DialError{Address: opts.HostPort, Err: dialErr}
	if errors.Is(ctx.Err(), context.Canceled) {
		return e // the caller gave up; nothing to explain
	}
	if code := serviceerror.ToStatus(dialErr).Code(); code == codes.Unauthenticated || code == codes.PermissionDenied {
		e.Cause = ErrUnauthenticated
		return e
	}
	// The dial may have used up ctx's deadline; the probe gets its own.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	defer cancel()
	e.Cause, e.Detail = probe(pctx, opts.HostPort, opts.ConnectionOptions.TLS)
	return e
}

// probe shakes hands with the server as a client with cfg would (nil: a
// plain client, asking whether the server wants TLS) and returns the cause
// of a failure it recognises, or nil.
func probe(ctx context.Context, hostPort string, cfg *tls.Config) (cause, detail error) {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		return nil, nil
	}
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", hostPort)
	if err != nil {
		return nil, nil // unreachable: the SDK's error says so
	}
	defer raw.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = raw.SetDeadline(deadline)
	}
	if cfg == nil {
		tc := tls.Client(raw, &tls.Config{ServerName: host, InsecureSkipVerify: true}) //nolint:gosec // only asks whether the server speaks TLS
		if tc.HandshakeContext(ctx) == nil {
			return ErrTLSRequired, nil
		}
		return nil, nil
	}
	pc := cfg.Clone()
	if pc.ServerName == "" {
		pc.ServerName = host // as gRPC does
	}
	// The server asks for a client certificate only when it checks them;
	// whether it asked, and whether there was one to give, tell a missing
	// certificate from a refused one.
	asked := false
	hasCert := len(cfg.Certificates) > 0 || cfg.GetClientCertificate != nil
	given := cfg.GetClientCertificate
	pc.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
		asked = true
		switch {
		case given != nil:
			return given(cri)
		case len(cfg.Certificates) > 0:
			return &cfg.Certificates[0], nil
		}
		return &tls.Certificate{}, nil
	}
	tc := tls.Client(raw, pc)
	err = tc.HandshakeContext(ctx)
	if err == nil {
		if !asked {
			return nil, nil
		}
		// In TLS 1.3 the server judges the client's certificate after the
		// client has finished its handshake: its verdict is the first thing
		// read (a gRPC server otherwise opens with its settings frame).
		if _, err = tc.Read(make([]byte, 1)); err == nil {
			return nil, nil
		}
	}
	var unknown x509.UnknownAuthorityError
	var badName x509.HostnameError
	var invalid x509.CertificateInvalidError
	var record tls.RecordHeaderError
	switch {
	case errors.As(err, &unknown):
		return ErrUnknownAuthority, err
	case errors.As(err, &badName):
		return ErrServerName, err
	case errors.As(err, &invalid):
		return ErrServerCertInvalid, err
	case errors.As(err, &record):
		return ErrNotTLS, nil
	case isRemoteAlert(err) && asked && !hasCert:
		return ErrClientCertRequired, nil
	case isRemoteAlert(err) && asked:
		return ErrClientCertRefused, nil
	}
	return nil, nil
}

// isRemoteAlert reports whether err is a TLS alert from the other side.
func isRemoteAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}
