package gateway

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// Defaults of the limits in Options; docs/gateway.md ("Limits") says why.
const (
	// DefaultMaxFollowedSessions keeps a gateway's history long polls (one
	// a followed session) well below Temporal's default of 1,200
	// concurrent long polls of one kind per namespace and frontend
	// (frontend.namespaceCount), which every other follower of the
	// namespace shares: another gateway at its own limit, keel CLIs
	// following sessions.
	DefaultMaxFollowedSessions = 500
	// DefaultMaxStreamsPerKey bounds one API key's open streams, so no
	// key holds more than two fifths of the followed sessions.
	DefaultMaxStreamsPerKey = 200
	// DefaultMaxStreamsPerAddr bounds one client address's open streams.
	DefaultMaxStreamsPerAddr = 100
)

// limitRetryAfter is the Retry-After, in seconds, of a stream refused by
// a limit on open streams or followed sessions: one of them must close
// first, which takes longer than a blip.
const limitRetryAfter = 5

// MaxSteerBodyBytes bounds the body of POST /steer: a steering text of at
// most api.MaxPromptBytes as a JSON string, which escaping can make twice
// as long, its attachments (keel.MaxAttachments references, each at most
// maxAttachmentJSON) and its object. Routes without a limit of their own
// take Options.MaxBodyBytes; every route but the upload's takes at most
// that.
const MaxSteerBodyBytes = 2*api.MaxPromptBytes + 1<<10 + keel.MaxAttachments*maxAttachmentJSON

// maxAttachmentJSON bounds one attachment reference as JSON: its name of
// keel.MaxAttachmentName bytes, every one escaped as \u00XX at worst,
// and its other fields.
const maxAttachmentJSON = 6*keel.MaxAttachmentName + 512

// followers counts what holds a Temporal history long poll: a session's
// hub, or an AG-UI stream's run follower.
type followers struct {
	mu   sync.Mutex
	n    int
	most int
}

// acquire takes a slot, or returns 503 overloaded when all are taken.
func (f *followers) acquire() *Error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n >= f.most {
		return &Error{Code: CodeOverloaded, Retryable: true, status: http.StatusServiceUnavailable, retryAfter: limitRetryAfter,
			Message: fmt.Sprintf("the gateway follows its maximum of %d sessions at once (each holds a Temporal long poll); retry later", f.most)}
	}
	f.n++
	return nil
}

func (f *followers) release() {
	f.mu.Lock()
	f.n--
	f.mu.Unlock()
}

// count reports the slots taken.
func (f *followers) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// clients counts each client's open streams, by API key and by address.
// It is guarded by Gateway.mu.
type clients struct {
	perKey  map[int]int
	perAddr map[string]int
}

// admit counts a stream of key k (nil without keys) from addr against
// the per-client limits (negative: none), or returns 429
// too_many_streams. Gateway.mu is held.
func (c *clients) admit(opts *Options, k *keyEntry, addr string) *Error {
	refuse := func(who string, most int) *Error {
		return &Error{Code: CodeTooManyStreams, Retryable: true, status: http.StatusTooManyRequests, retryAfter: limitRetryAfter,
			Message: fmt.Sprintf("%s holds its maximum of %d event streams; close one, or retry later", who, most)}
	}
	if k != nil && opts.MaxStreamsPerKey > 0 && c.perKey[k.id] >= opts.MaxStreamsPerKey {
		return refuse("this API key", opts.MaxStreamsPerKey)
	}
	if opts.MaxStreamsPerAddr > 0 && c.perAddr[addr] >= opts.MaxStreamsPerAddr {
		return refuse("this client address ("+addr+")", opts.MaxStreamsPerAddr)
	}
	return nil
}

// add counts a stream in; d is 1 or -1. Gateway.mu is held.
func (c *clients) add(k *keyEntry, addr string, d int) {
	if k != nil {
		if c.perKey[k.id] += d; c.perKey[k.id] <= 0 {
			delete(c.perKey, k.id)
		}
	}
	if c.perAddr[addr] += d; c.perAddr[addr] <= 0 {
		delete(c.perAddr, addr)
	}
}

// proxies are the reverse proxies whose X-Forwarded-For the gateway
// believes (Options.TrustedProxies).
type proxies []netip.Prefix

// parseProxies reads IP addresses and CIDR prefixes.
func parseProxies(list []string) (proxies, error) {
	var out proxies
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("gateway: trusted proxy %q: want an IP address or a CIDR prefix (10.0.0.0/8)", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

func (p proxies) trusted(a netip.Addr) bool {
	for _, pr := range p {
		if pr.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr is the address a request's streams are counted under: the
// connection's peer, or, when that peer is a trusted proxy, the
// right-most X-Forwarded-For hop that is not one (the hops to its left
// are the client's to write, so they are not believed). An IPv6 address
// counts by its /64, which one client usually holds whole.
func (p proxies) clientAddr(r *http.Request) string {
	a, ok := hostAddr(r.RemoteAddr)
	if !ok {
		return r.RemoteAddr // not an IP peer (a unix socket): one bucket
	}
	if len(p) > 0 && p.trusted(a) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			h, ok := hostAddr(strings.TrimSpace(hops[i]))
			if !ok {
				break // not an address: keep the last hop believed
			}
			a = h
			if !p.trusted(h) {
				break
			}
		}
	}
	if a.Is6() {
		pr, _ := a.Prefix(64)
		return pr.String()
	}
	return a.String()
}

// hostAddr reads an IP address, with or without a port.
func hostAddr(s string) (netip.Addr, bool) {
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}
