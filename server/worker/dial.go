package worker

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/keelrun/keel/connect"
	"github.com/keelrun/keel/internal/instrument"
	"github.com/keelrun/keel/logging"
	"github.com/keelrun/keel/server/store"
)

// Dial returns the Temporal client New needs, connected as conn says: TLS,
// a client certificate for mutual TLS, an API key, and Temporal's
// environment variables and configuration profile for what conn leaves
// unset (see package connect). The client's payloads go through
// opts.Codec when it is set, it logs to opts.Logger, records metrics on
// opts.MetricsHandler and traces to opts.TracerProvider. The Options
// returned are opts with Namespace set to the namespace connected to:
//
//	c, opts, err := worker.Dial(ctx, connect.Options{}, worker.Options{Workspace: "./workspace"})
//	if err != nil {
//		return err // a *connect.DialError says why, e.g. a client certificate is required
//	}
//	defer c.Close()
//	w, err := worker.New(c, opts)
func Dial(ctx context.Context, conn connect.Options, opts Options) (client.Client, Options, error) {
	resolved, err := conn.Resolve()
	if err != nil {
		return nil, opts, err
	}
	sdk, err := ClientOptions(opts)
	if err != nil {
		return nil, opts, err
	}
	c, err := connect.Dial(ctx, conn, sdk)
	if err != nil {
		return nil, opts, err
	}
	opts.Namespace = resolved.Namespace
	return c, opts, nil
}

// ClientOptions are the options of the Temporal client a worker with opts
// runs on, but for the connection's: the data converter over opts.Codec,
// the SDK's logger over opts.Logger, opts.MetricsHandler, and the tracing
// interceptor over opts.TracerProvider (the worker inherits it). Dial
// uses them; so does a program that dials another way (a server running
// in the same process).
func ClientOptions(opts Options) (client.Options, error) {
	var sdk client.Options
	if opts.Codec != nil {
		sdk.DataConverter = store.NewDataConverter(opts.Codec)
	}
	if opts.Logger != nil {
		sdk.Logger = logging.Temporal(opts.Logger)
	}
	sdk.MetricsHandler = opts.MetricsHandler
	if opts.TracerProvider != nil {
		tracing, err := instrument.TracingInterceptor(opts.TracerProvider)
		if err != nil {
			return sdk, fmt.Errorf("worker: %w", err)
		}
		sdk.Interceptors = append(sdk.Interceptors, tracing)
	}
	return sdk, nil
}
