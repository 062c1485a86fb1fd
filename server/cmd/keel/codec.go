package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/keelrun/keel/internal/httpguard"
	"github.com/keelrun/keel/server/store"
)

const codecDesc = `Serves the content store's codec endpoint on its own, for a deployment's
Temporal Web UI and the temporal CLI: Temporal's codec server protocol (POST
/codec/decode and /codec/encode) over the store at --store, decrypting too
with --encryption-key-file. It is what keel dev serves at /codec, for a
deployment whose Temporal server and Web UI run apart from keel (see
docs/operations.md). Anyone who reaches it reads every value, so it listens
on loopback unless --listen says otherwise, and then it requires
--codec-token (or $KEEL_CODEC_TOKEN) as "Authorization: Bearer TOKEN"
unless --insecure-no-token is given for a network only trusted readers
reach. The Web UI calls it from the browser: --cors-origin names the UI's
origin.`

func cmdCodec(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("codec", "keel codec --store URL [flags]", codecDesc)
	var st storeFlags
	st.register(fs, true)
	listen := fs.String("listen", "127.0.0.1:7281", "`HOST:PORT` to listen on")
	origin := fs.String("cors-origin", "", "`ORIGIN` of the Web UI (scheme://host:port) allowed to call from the browser")
	token := fs.String("codec-token", os.Getenv(envCodecToken), "bearer `TOKEN` every request must carry (default $"+envCodecToken+")")
	noToken := fs.Bool("insecure-no-token", false, "serve a non-loopback --listen without a token")
	var hosts hostsFlag
	hosts.register(fs, "the endpoint should")
	if _, code, ok := fs.parse(args, stdout, stderr, 0, 0); !ok {
		return code
	}
	if st.url == "" {
		return fs.usageError(stderr, "--store (or $%s) is required: the codec endpoint reads the content store", envStore)
	}
	if _, _, err := net.SplitHostPort(*listen); err != nil {
		return fs.usageError(stderr, "--listen %q: %v", *listen, err)
	}
	if err := store.CheckListen(*listen, *token != ""); errors.Is(err, store.ErrNoToken) && !*noToken {
		return fs.usageError(stderr, "--listen %s is reachable from other machines: set --codec-token (or $%s), or --insecure-no-token", *listen, envCodecToken)
	}
	handlerOpts := store.HandlerOptions{AllowOrigin: *origin, Token: *token, AllowedHosts: hosts.items}
	if err := handlerOpts.Validate(); err != nil {
		return fs.usageError(stderr, "%v", err)
	}
	// /healthz passes the same Host check as the endpoint.
	health, err := httpguard.New(httpguard.Options{AllowedHosts: hosts.items})
	if err != nil {
		return fs.usageError(stderr, "%v", err)
	}
	cs, err := st.open(ctx)
	if err != nil {
		return fail(stderr, "codec", err)
	}
	defer cs.close()
	mux := http.NewServeMux()
	mux.Handle("/codec/", http.StripPrefix("/codec", cs.codec.Handler(handlerOpts)))
	mux.Handle("/healthz", health.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })))
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return fail(stderr, "codec", fmt.Errorf("listen on %s: %w", *listen, err))
	}
	srv := httpguard.NewServer(mux)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	fmt.Fprintf(stdout, "keel codec: http://%s/codec (store %s, encryption %s)\n", l.Addr(), cs.where, encryptionNote(cs.keys))
	select {
	case err := <-served:
		return fail(stderr, "codec", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail(stderr, "codec", err)
	}
	return exitOK
}
