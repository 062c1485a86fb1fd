package gateway

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/internal/httpguard"
	"github.com/keelrun/keel/logging"
)

// Defaults of Options.
const (
	DefaultMaxBodyBytes   = 1 << 20
	DefaultKeepAlive      = 15 * time.Second
	DefaultWriteTimeout   = 30 * time.Second
	DefaultRequestTimeout = time.Minute
	DefaultMaxStreams     = 10000
	DefaultStreamBuffer   = 1024
)

// Options configure a Gateway. Every field is optional.
type Options struct {
	// APIKeys, when set, are the bearer tokens every API call must carry
	// (Authorization: Bearer KEY), each with full access. Without keys
	// (here or in Keys) the gateway is open: serve it on a loopback
	// address only (CheckListen).
	APIKeys []string
	// Keys are API keys with their scope and session prefix (read-only,
	// a team's sessions), as LoadAPIKeys reads them; with APIKeys, the
	// keys the gateway takes.
	Keys []APIKey
	// CORSOrigins are the browser origins (scheme://host[:port]) allowed to
	// call the API; "*" allows any. Requests from the gateway's own origin
	// and requests without an Origin header (programs) are always allowed;
	// a browser request from any other origin gets 403 origin_not_allowed.
	// An entry that is not an origin makes New fail.
	CORSOrigins []string
	// AllowedHosts are the host names (or IP addresses; no port) that
	// requests may name in their Host header besides the gateway's own
	// address (the address the connection arrived on) and, on a loopback
	// connection, localhost: the names a DNS record or a reverse proxy
	// gives the gateway. Any other Host gets 403 host_not_allowed, which
	// defeats DNS rebinding (a page whose name was made to resolve to the
	// gateway). Default: none.
	AllowedHosts []string
	// MaxBodyBytes bounds a request body; a larger one gets 413. An
	// upload's (POST /v1/attachments) is bounded by
	// MaxAttachmentBodyBytes instead. Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// KeepAlive is the longest an event stream stays silent: after it, a
	// comment line is sent so proxies and browsers keep the connection.
	// Default DefaultKeepAlive.
	KeepAlive time.Duration
	// WriteTimeout bounds one write to an event stream; a client that
	// takes no data for that long is disconnected (it resumes with
	// Last-Event-ID). Default DefaultWriteTimeout.
	WriteTimeout time.Duration
	// RequestTimeout bounds each call to Temporal of a non-streaming
	// request; when Temporal does not answer in time the call gets 503.
	// Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MaxStreams bounds the event streams open at once (AG-UI streams
	// included); one more gets 503 overloaded. Default DefaultMaxStreams.
	MaxStreams int
	// MaxFollowedSessions bounds the sessions the gateway follows at
	// once: each costs one Temporal history long poll however many
	// streams share it, and so does each AG-UI stream. A stream that
	// would follow one more gets 503 overloaded with Retry-After. Keep it
	// below the namespace's limit of concurrent long polls
	// (docs/gateway.md, "Limits"). Default DefaultMaxFollowedSessions.
	MaxFollowedSessions int
	// MaxStreamsPerKey bounds the streams open at once with one API key;
	// one more gets 429 too_many_streams with Retry-After. Default
	// DefaultMaxStreamsPerKey; negative: no limit.
	MaxStreamsPerKey int
	// MaxStreamsPerAddr bounds the streams open at once from one client
	// address (the connection's peer, an IPv6 one by its /64; behind a
	// reverse proxy that is the proxy, unless it is in TrustedProxies);
	// one more gets 429 too_many_streams with Retry-After. Default
	// DefaultMaxStreamsPerAddr; negative: no limit.
	MaxStreamsPerAddr int
	// TrustedProxies are the IP addresses or CIDR prefixes of reverse
	// proxies in front of the gateway: for a connection from one, the
	// client address is the right-most X-Forwarded-For hop that is not a
	// trusted proxy. Default: none, and X-Forwarded-For is ignored.
	TrustedProxies []string
	// StreamBuffer is how many events wait for a stream whose client
	// reads slowly; past it, deltas are dropped (and reported with a lag
	// event) and durable events are read again from the session's log
	// once the client catches up. Default DefaultStreamBuffer.
	StreamBuffer int
	// WebUIURL is the Temporal Web UI's base URL (http://127.0.0.1:8233),
	// for the web page's links to a session's and a run's workflows.
	// Default: none, and the page shows no links.
	WebUIURL string
	// Agents are the agents the worker offers, which the gateway serves
	// as MCP tools and A2A agents (docs/interop.md). Default: none, and
	// the MCP endpoint lists no tools and A2A serves the default agent
	// only.
	Agents []Agent
	// Logger receives one record per request (method, path, status,
	// duration; never a header, query or body) at debug level, at warn for
	// 503 and 501 (an upload without a content store) and error for other
	// 5xx answers, with their causes; a request about a session carries
	// its session_id.
	// Default: logging.Default() (warnings on stderr).
	Logger *zap.Logger
}

// Gateway is keel's HTTP API over a client.Client: an http.Handler serving
// the routes of docs/gateway.md under /v1. The event streams of one
// session share one client.Session.EventsFrom (one Temporal long poll, one
// live subscription), each with its own bounded queue (StreamBuffer).
type Gateway struct {
	c      *client.Client
	opts   Options
	keys   *keyring
	cors   *cors
	log    *zap.Logger
	mux    *http.ServeMux
	mu     sync.Mutex
	routes []Route

	ctx     context.Context
	cancel  context.CancelFunc
	streams sync.WaitGroup
	open    atomic.Int64
	// clients counts the open streams of each key and address (mu).
	clients clients
	proxies proxies
	// hubs follow the sessions that have event streams, one each.
	hubsMu     sync.Mutex
	hubs       map[string]*hub
	ringEvents int
	// followers counts the hubs and AG-UI run followers: Temporal
	// history long polls.
	followers followers

	// host checks Host and cross-origin writes and sets the security
	// headers (internal/httpguard, shared with keel's other listeners).
	host *httpguard.Guard

	// agents are Options.Agents; interop holds the MCP and A2A
	// endpoints' state (interop.go).
	agents  *catalogue
	interop interopState
}

// Route is one method and path the gateway serves, as an http.ServeMux
// pattern without the method ("/v1/sessions/{id}").
type Route struct {
	Method string
	Path   string
	// Public routes take no API key.
	Public bool
	// sessions says the handler checks the sessions it touches against
	// the key's prefix itself (the path names none).
	sessions bool
	// maxBody bounds the route's body below Options.MaxBodyBytes; 0: no
	// bound of its own.
	maxBody int64
	// ownBody, when set, is the route's body limit in place of
	// Options.MaxBodyBytes (an upload's, above it).
	ownBody int64
	// noSession says the route touches no session's data (an upload): a
	// key's session prefix does not limit it.
	noSession bool
}

// Validate checks what New would refuse in the options: the keys and the
// trusted proxies. Errors never quote a key.
func (o Options) Validate() error {
	if _, err := newKeyring(o.APIKeys, o.Keys); err != nil {
		return err
	}
	_, err := parseProxies(o.TrustedProxies)
	return err
}

// New returns a gateway calling keel through c. The caller keeps c and
// closes it after Close.
func New(c *client.Client, opts Options) (*Gateway, error) {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = DefaultKeepAlive
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	if opts.MaxFollowedSessions <= 0 {
		opts.MaxFollowedSessions = DefaultMaxFollowedSessions
	}
	if opts.MaxStreamsPerKey == 0 {
		opts.MaxStreamsPerKey = DefaultMaxStreamsPerKey
	}
	if opts.MaxStreamsPerAddr == 0 {
		opts.MaxStreamsPerAddr = DefaultMaxStreamsPerAddr
	}
	if opts.StreamBuffer <= 0 {
		opts.StreamBuffer = DefaultStreamBuffer
	}
	if opts.Logger == nil {
		opts.Logger = logging.Default()
	}
	keys, err := newKeyring(opts.APIKeys, opts.Keys)
	if err != nil {
		return nil, err
	}
	px, err := parseProxies(opts.TrustedProxies)
	if err != nil {
		return nil, err
	}
	agents, err := newCatalogue(opts.Agents)
	if err != nil {
		return nil, err
	}
	host, err := httpguard.New(httpguard.Options{AllowedHosts: opts.AllowedHosts, TrustedOrigins: opts.CORSOrigins,
		JSON: true, ContentSecurityPolicy: ContentSecurityPolicy})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g := &Gateway{c: c, opts: opts, keys: keys, cors: newCORS(opts.CORSOrigins), host: host,
		log: opts.Logger.With(zap.String("component", "gateway")), mux: http.NewServeMux(), hubs: map[string]*hub{},
		ringEvents: defaultRingEvents, proxies: px, followers: followers{most: opts.MaxFollowedSessions},
		clients: clients{perKey: map[int]int{}, perAddr: map[string]int{}}, agents: agents}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.routeAPI()
	g.routeWeb()
	return g, nil
}

// Client returns the client the gateway calls keel with, for handlers
// mounted with Handle.
func (g *Gateway) Client() *client.Client { return g.c }

// Handle mounts h at method and path (an http.ServeMux pattern without the
// method, such as "/v1/ag-ui"), behind the same API keys, body limit, CORS
// and logging as the built-in routes. A route under /v1 must also be
// described in the OpenAPI document (the gateway's tests check that).
// Handle panics when the pattern conflicts with a mounted one, as
// http.ServeMux does.
func (g *Gateway) Handle(method, path string, h http.Handler) {
	g.handle(Route{Method: method, Path: path}, h)
}

// HandlePublic is Handle without the API key check, for what a browser
// loads before it has a key (a web page and its assets).
func (g *Gateway) HandlePublic(method, path string, h http.Handler) {
	g.handle(Route{Method: method, Path: path, Public: true}, h)
}

func (g *Gateway) handle(rt Route, h http.Handler) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mux.Handle(rt.Method+" "+rt.Path, g.guard(rt, h))
	g.routes = append(g.routes, rt)
}

// Routes lists the mounted routes, in the order they were mounted.
func (g *Gateway) Routes() []Route {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.routes)
}

// Streams reports how many event streams are open.
func (g *Gateway) Streams() int { return int(g.open.Load()) }

// Close ends every open event stream and waits for their handlers to
// return (clients resume with Last-Event-ID elsewhere). Shut the
// http.Server down after, or before with a deadline: an open stream would
// hold its Shutdown until the stream ends.
func (g *Gateway) Close() {
	g.mu.Lock()
	g.cancel()
	g.mu.Unlock()
	g.streams.Wait()
}

// OpenStream is for handlers that hold a response open (an event stream
// of another protocol): it counts the stream against MaxStreams and the
// client's own limits (MaxStreamsPerKey, MaxStreamsPerAddr) and returns
// a context that ends when the client leaves or the gateway closes, and
// the function to call when the stream is over. When the gateway is
// closing or full, it returns an *Error for WriteError (503; 429 for a
// client at its own limit).
func (g *Gateway) OpenStream(r *http.Request) (context.Context, func(), error) {
	end, err := g.startStream(r)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(g.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
		end()
	}, nil
}

// startStream counts a new event stream of r's key and address, unless
// the gateway is closed, the client holds its maximum, or the gateway
// does; it returns the function that uncounts it.
func (g *Gateway) startStream(r *http.Request) (func(), *Error) {
	k, addr := requestKey(r), g.proxies.clientAddr(r)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ctx.Err() != nil {
		return nil, apiError(http.StatusServiceUnavailable, CodeUnavailable, "the gateway is shutting down; reconnect")
	}
	if err := g.clients.admit(&g.opts, k, addr); err != nil {
		return nil, err
	}
	if g.open.Load() >= int64(g.opts.MaxStreams) {
		return nil, &Error{Code: CodeOverloaded, Retryable: true, status: http.StatusServiceUnavailable,
			Message: fmt.Sprintf("the gateway holds its maximum of %d event streams; retry later", g.opts.MaxStreams)}
	}
	g.clients.add(k, addr, 1)
	g.open.Add(1)
	g.streams.Add(1)
	return func() {
		g.mu.Lock()
		g.clients.add(k, addr, -1)
		g.mu.Unlock()
		g.open.Add(-1)
		g.streams.Done()
	}, nil
}

// ServeHTTP checks the Host and the origin, answers CORS preflights, and
// routes the request; an unknown route or method gets a typed error.
// Every response carries the security headers (ContentSecurityPolicy,
// X-Frame-Options: DENY, nosniff, Referrer-Policy: no-referrer).
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	w, refused := g.host.Begin(w, r)
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		g.logRequest(r, rec.status, time.Since(start), rec.cause)
	}()
	if refused != nil {
		// A Host that does not name the gateway: a web page whose name
		// was made to resolve to it (DNS rebinding) would otherwise be on
		// the gateway's own origin, keys or not. Or a state-changing
		// request from another origin.
		writeError(rec, apiError(refused.Status, refused.Code, refused.Message))
		return
	}
	origin := r.Header.Get("Origin")
	if !g.cors.allowed(r, origin) {
		writeError(rec, apiError(http.StatusForbidden, CodeOriginNotAllowed,
			"origin "+origin+" is not allowed to call this gateway (see --cors-origin)"))
		return
	}
	g.cors.headers(rec, origin)
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		h := rec.Header()
		h.Set("Access-Control-Allow-Methods", corsMethods)
		h.Set("Access-Control-Allow-Headers", corsHeaders)
		h.Set("Access-Control-Max-Age", "600")
		rec.WriteHeader(http.StatusNoContent)
		return
	}
	if _, pattern := g.mux.Handler(r); pattern == "" {
		g.noRoute(rec, r)
		return
	}
	// The mux's ServeHTTP, not the handler found: it sets the path values.
	g.mux.ServeHTTP(rec, r)
}

// noRoute answers a request no pattern matched: 405 with Allow when the
// path exists under other methods, else 404.
func (g *Gateway) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete, http.MethodPut, http.MethodPatch} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := g.mux.Handler(probe); p != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, apiError(http.StatusMethodNotAllowed, CodeMethodNotAllowed,
			r.Method+" is not served at "+r.URL.Path+"; use "+strings.Join(allow, " or ")))
		return
	}
	writeError(w, apiError(http.StatusNotFound, CodeRouteNotFound, "no route "+r.URL.Path+" (see /v1/openapi.json)"))
}

// guard wraps a route's handler: the API key and what it may do (its
// scope against the method, its prefix against the session; 401, 403 or
// 404 before the handler runs), and the route's body limit.
func (g *Gateway) guard(rt Route, h http.Handler) http.Handler {
	limit := g.opts.MaxBodyBytes
	if rt.maxBody > 0 {
		limit = min(limit, rt.maxBody)
	}
	if rt.ownBody > 0 {
		limit = rt.ownBody
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rt.Public && g.keys.enabled() {
			k := g.keys.match(r)
			if k == nil {
				writeError(w, apiError(http.StatusUnauthorized, CodeUnauthorized,
					"a valid API key is required: Authorization: Bearer KEY"))
				return
			}
			if err := k.authorize(rt, r); err != nil {
				writeError(w, err)
				return
			}
			r = withKey(r, k)
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		h.ServeHTTP(w, r)
	})
}

// recorder remembers the status written, and the cause of a 5xx answer
// for the log.
type recorder struct {
	http.ResponseWriter
	status  int
	written bool
	cause   error
}

func (r *recorder) WriteHeader(status int) {
	if !r.written {
		r.status, r.written = status, true
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.written = true
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes and
// write deadlines of event streams).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// logRequest logs one request: never its headers, query or body, which
// can hold keys and prompts.
func (g *Gateway) logRequest(r *http.Request, status int, d time.Duration, cause error) {
	level := zapcore.DebugLevel
	switch {
	case status == http.StatusServiceUnavailable:
		level = zapcore.WarnLevel // Temporal out of reach or busy: not the gateway's fault
	case status == http.StatusNotImplemented:
		level = zapcore.WarnLevel // an upload to a gateway without a content store: its configuration
	case status >= 500:
		level = zapcore.ErrorLevel
	}
	ce := g.log.Check(level, "request")
	if ce == nil {
		return
	}
	fields := []zap.Field{zap.String("method", r.Method), zap.String("path", r.URL.Path),
		zap.Int("status", status), zap.Duration("duration", d)}
	if id := r.PathValue("id"); id != "" {
		fields = append(fields, zap.String(logging.FieldSessionID, id))
	}
	if status >= 500 && cause != nil {
		fields = append(fields, zap.String("error", cause.Error()))
	}
	ce.Write(fields...)
}
