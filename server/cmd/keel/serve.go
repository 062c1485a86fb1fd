package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/httpguard"
	"github.com/keelrun/keel/server/gateway"
)

const serveDesc = `Serves keel's HTTP API (docs/gateway.md) against the Temporal server at
--address: JSON under /v1, a session's events as a JSON page or as
Server-Sent Events, and the OpenAPI document at /v1/openapi.json. It listens
on 127.0.0.1 at --http-port unless --listen names another address; it
refuses an address other machines can reach unless API keys are set
(--api-key-file, or $KEEL_API_KEYS), and then every call must carry one as
"Authorization: Bearer KEY"; a key may be limited to reading (scope=read)
and to the sessions under a prefix (prefix=P). Event streams are limited per
key, per client address and per gateway (--max-streams-per-key,
--max-streams-per-addr, --max-followed-sessions, --max-streams). Streamed
text comes from NATS (--nats); without
it, event streams carry durable events only. Stops on Ctrl-C, ending open
streams (clients resume with Last-Event-ID).`

// gatewayFlags configure the gateway in `keel serve` and `keel dev`.
type gatewayFlags struct {
	keyFile string
	origins listFlag
	proxies listFlag
	// The gateway's limits; 0 takes the gateway's default.
	maxStreams, maxFollowed, perKey, perAddr int
}

func (g *gatewayFlags) register(fs *flagSet) {
	fs.StringVar(&g.keyFile, "api-key-file", "",
		"`FILE` of the keys the HTTP API's callers must send, one a line, each optionally narrowed: KEY scope=read prefix=team-a- (also $"+gateway.EnvAPIKeys+", comma-separated); not Temporal's key (--api-key)")
	fs.Var(&g.origins, "cors-origin", "browser `ORIGINS` (scheme://host:port, comma-separated, or *) allowed to call the HTTP API")
	fs.IntVar(&g.maxStreams, "max-streams", 0, fmt.Sprintf("event streams the HTTP API holds at once (`N`; default %d)", gateway.DefaultMaxStreams))
	fs.IntVar(&g.maxFollowed, "max-followed-sessions", 0, fmt.Sprintf(
		"sessions the HTTP API follows at once, each one Temporal history long poll (`N`; default %d, below Temporal's 1200 a namespace)", gateway.DefaultMaxFollowedSessions))
	fs.IntVar(&g.perKey, "max-streams-per-key", 0, fmt.Sprintf("event streams one API key holds at once (`N`; default %d, -1 for no limit)", gateway.DefaultMaxStreamsPerKey))
	fs.IntVar(&g.perAddr, "max-streams-per-addr", 0, fmt.Sprintf("event streams one client address holds at once (`N`; default %d, -1 for no limit)", gateway.DefaultMaxStreamsPerAddr))
	fs.Var(&g.proxies, "trusted-proxy", "reverse proxies (`IPS`: addresses or CIDR prefixes, comma-separated) whose X-Forwarded-For names the client address that --max-streams-per-addr counts")
}

// options loads the keys and returns the gateway's options.
func (g *gatewayFlags) options(logger *zap.Logger) (gateway.Options, error) {
	for name, v := range map[string]int{"--max-streams": g.maxStreams, "--max-followed-sessions": g.maxFollowed} {
		if v < 0 {
			return gateway.Options{}, fmt.Errorf("%s %d: want a positive number (0 for the default)", name, v)
		}
	}
	keys, err := gateway.LoadAPIKeys(g.keyFile)
	if err != nil {
		return gateway.Options{}, err
	}
	opts := gateway.Options{Keys: keys, CORSOrigins: g.origins.items, Logger: logger,
		MaxStreams: g.maxStreams, MaxFollowedSessions: g.maxFollowed, MaxStreamsPerKey: g.perKey, MaxStreamsPerAddr: g.perAddr,
		TrustedProxies: g.proxies.items}
	// Before anything is dialled: a bad --trusted-proxy fails at once.
	return opts, opts.Validate()
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve", "keel serve [flags]", serveDesc)
	var conn connFlags
	var gw gatewayFlags
	conn.register(fs, true)
	gw.register(fs)
	httpPort := fs.Int("http-port", defaultHTTPPort, "`port` to listen on, on 127.0.0.1")
	listen := fs.String("listen", "", "`HOST:PORT` to listen on instead (0.0.0.0:7280: every interface; needs API keys)")
	webUI := fs.String("web-ui", "", "`URL` of the Temporal Web UI (http://127.0.0.1:8233) the web page links sessions and runs to; none by default")
	var logs logFlags
	logs.register(fs, "to stderr", " (one a request)")
	var hosts hostsFlag
	hosts.register(fs, "the HTTP API should")
	var conf configFlag
	conf.registerServe(fs)
	if _, code, ok := fs.parse(args, stdout, stderr, 0, 0); !ok {
		return code
	}
	if err := conf.load(); err != nil {
		return fail(stderr, "serve", err)
	}
	if *httpPort < 0 || *httpPort > 65535 {
		return fs.usageError(stderr, "--http-port %d is not a port (0 picks a free one)", *httpPort)
	}
	logger, _, err := logs.logger(stderr)
	if err != nil {
		return fs.usageError(stderr, "%v", err)
	}
	defer func() { _ = logger.Sync() }()
	conn.logger = logger
	addr := *listen
	if addr == "" {
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(*httpPort))
	}
	opts, err := gw.options(logger)
	if err != nil {
		return fail(stderr, "serve", err)
	}
	opts.AllowedHosts = hosts.items
	opts.Agents = conf.gatewayAgents()
	if *webUI != "" {
		u, err := url.Parse(*webUI)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fs.usageError(stderr, "--web-ui %q: want an http or https URL, such as http://127.0.0.1:8233", *webUI)
		}
		opts.WebUIURL = *webUI
	}
	if err := gateway.CheckListen(addr, len(opts.Keys) > 0); err != nil {
		return fail(stderr, "serve", err)
	}
	kc, err := conn.dial(ctx, stderr, api.RunConfig{})
	if err != nil {
		return fail(stderr, "serve", err)
	}
	defer kc.close()
	g, err := gateway.New(kc.Client, opts)
	if err != nil {
		return fail(stderr, "serve", err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		g.Close()
		return fail(stderr, "serve", fmt.Errorf("listen on %s: %w", addr, err))
	}
	srv := httpguard.NewServer(g)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()

	keys := "none (loopback only)"
	if n := len(opts.Keys); n > 0 {
		keys = fmt.Sprintf("%d configured; send Authorization: Bearer KEY", n)
	}
	live := "durable events only (no NATS)"
	if kc.live != nil {
		live = liveRedact(conn.nats)
	}
	fmt.Fprintf(stdout, `keel serve is up.
  HTTP API   http://%s/v1  (OpenAPI: /v1/openapi.json)
  Temporal   %s  (namespace %s)
  live       %s
  API keys   %s
`, l.Addr(), conn.address, conn.namespace, live, keys)

	select {
	case <-ctx.Done():
	case err := <-served:
		g.Close()
		return fail(stderr, "serve", err)
	}
	fmt.Fprintln(stdout, "keel serve: stopping…")
	g.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fail(stderr, "serve", err)
	}
	fmt.Fprintln(stdout, "keel serve: stopped.")
	return exitOK
}
