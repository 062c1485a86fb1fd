package httpguard

import (
	"fmt"
	"net/http"
	"strings"
)

// DefaultContentSecurityPolicy is the policy of a listener that serves no
// page (the codec endpoint, /metrics): nothing may load, nothing may frame
// it.
const DefaultContentSecurityPolicy = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// Options configure a Guard. Every field is optional.
type Options struct {
	// AllowedHosts are the host names and IP addresses (no port, no
	// scheme, no wildcard) the listener answers to besides its own
	// address and, on loopback, localhost: the names a reverse proxy or
	// a DNS record gives it (keel.example.com), or "localhost" for a
	// container whose published port a browser reaches as localhost.
	// Default: none.
	AllowedHosts []string
	// TrustedOrigins are the browser origins (scheme://host[:port]) whose
	// cross-origin requests may change state: the Web UI's origin for the
	// codec endpoint, the gateway's --cors-origin list. "*" trusts every
	// origin (the cross-origin check is off). Default: none, so only the
	// listener's own pages and programs (which send no Origin) may.
	TrustedOrigins []string
	// JSON answers refusals as {"code","message"} JSON; otherwise as
	// plain text. Default: plain text.
	JSON bool
	// ContentSecurityPolicy is set on every response; when the handler
	// sets a policy of its own, both are sent, and a browser enforces
	// both. Default: DefaultContentSecurityPolicy.
	ContentSecurityPolicy string
	// SameOriginFrames lets the listener's own pages frame each other
	// (X-Frame-Options: SAMEORIGIN instead of DENY), for an application
	// that embeds itself, as the Temporal Web UI does; its policy should
	// then say frame-ancestors 'self'. Other sites still cannot frame it.
	// Default: false, no frames at all.
	SameOriginFrames bool
}

// Guard checks the requests of one listener and sets the headers of its
// responses. It is safe for concurrent use.
type Guard struct {
	hosts  map[string]bool
	csrf   *http.CrossOriginProtection // nil: any origin is trusted
	json   bool
	policy string
	frames string
}

// New returns a guard for opts. An allowed host that is not a host name or
// an IP address, or a trusted origin that is not scheme://host[:port], is
// an error wrapping ErrConfig.
func New(opts Options) (*Guard, error) {
	g := &Guard{hosts: map[string]bool{}, csrf: http.NewCrossOriginProtection(), json: opts.JSON,
		policy: opts.ContentSecurityPolicy, frames: FrameOptions}
	if opts.SameOriginFrames {
		g.frames = "SAMEORIGIN"
	}
	if g.policy == "" {
		g.policy = DefaultContentSecurityPolicy
	}
	for _, h := range opts.AllowedHosts {
		name, err := allowedHost(h)
		if err != nil {
			return nil, err
		}
		g.hosts[name] = true
	}
	for _, o := range opts.TrustedOrigins {
		o = strings.TrimRight(strings.TrimSpace(o), "/")
		switch o {
		case "":
		case "*":
			g.csrf = nil
		default:
			if g.csrf == nil {
				continue
			}
			if err := g.csrf.AddTrustedOrigin(o); err != nil {
				return nil, fmt.Errorf("%w: trusted origin: %v", ErrConfig, err)
			}
		}
	}
	return g, nil
}

// Check returns why r must be refused, nil when it may proceed: a Host
// that does not name the listener, or a state-changing request from an
// origin that is neither the listener's own nor trusted.
func (g *Guard) Check(r *http.Request) *Error {
	if !g.hostAllowed(r) {
		return &Error{Status: http.StatusForbidden, Code: CodeHostNotAllowed,
			Message: fmt.Sprintf("this listener does not answer to host %q (a name made to point at it, DNS rebinding, is refused); "+
				"an operator allows a name with --allowed-host", hostName(r.Host))}
	}
	if g.csrf != nil {
		if err := g.csrf.Check(r); err != nil {
			return &Error{Status: http.StatusForbidden, Code: CodeOriginNotAllowed,
				Message: "a cross-origin " + r.Method + " is refused: only this listener's own pages and trusted origins may change state"}
		}
	}
	return nil
}

// Begin starts serving r: it wraps w so that every response carries the
// security headers, and checks r. With a non-nil *Error the caller
// answers it on the returned writer (Error.Write) and stops; otherwise it
// serves r on the returned writer.
func (g *Guard) Begin(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *Error) {
	return &headerWriter{ResponseWriter: w, policy: g.policy, frames: g.frames}, g.Check(r)
}

// Handler wraps h: requests that Check refuses are answered with their
// error (JSON or text, Options.JSON), the others reach h; every response
// carries the security headers.
func (g *Guard) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w, e := g.Begin(w, r)
		if e != nil {
			e.Write(w, g.json)
			return
		}
		h.ServeHTTP(w, r)
	})
}
