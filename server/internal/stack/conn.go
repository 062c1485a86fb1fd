package stack

import (
	"context"
	"time"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel/connect"
)

// Server is a Temporal server running in this process (keel dev's, a
// test's): *devserver.Server satisfies it. Its Dial fills in the address,
// the namespace, TLS and a logger as quiet as the server's.
type Server interface {
	Address() string
	Namespace() string
	Dial(ctx context.Context, opts sdkclient.Options) (sdkclient.Client, error)
}

// Conn is how to reach a Temporal server that runs elsewhere: the
// options as given (flags, a program's) and what they resolve to with the
// environment and Temporal's configuration profile. Resolve makes one;
// it then flows unchanged to every client the stack dials.
type Conn struct {
	// Options are the connection options as given.
	Options connect.Options
	// HostPort and Namespace are what Options resolved to.
	HostPort  string
	Namespace string
	// resolved is all of it (TLS, credentials, headers): what Dial uses.
	resolved sdkclient.Options
}

// Resolve merges o with the environment and the configuration profile,
// once, and keeps the address and namespace that result.
func Resolve(o connect.Options) (Conn, error) {
	r, err := o.Resolve()
	if err != nil {
		return Conn{}, err
	}
	return Conn{Options: o, HostPort: r.HostPort, Namespace: r.Namespace, resolved: r}, nil
}

// Dial connects to c with the rest of the client's options from sdk
// (logger, data converter, interceptors, metrics) within timeout (0: no
// bound but ctx's). A failure to connect is a *connect.DialError.
func (c Conn) Dial(ctx context.Context, sdk sdkclient.Options, timeout time.Duration) (sdkclient.Client, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if c.resolved.HostPort == "" {
		// A Conn not made by Resolve.
		return connect.Dial(ctx, c.Options, sdk)
	}
	return connect.DialResolved(ctx, c.resolved, sdk)
}
