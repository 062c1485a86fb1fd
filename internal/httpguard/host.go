package httpguard

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// maxHostName is the longest DNS name (RFC 1035).
const maxHostName = 253

// allowedHost normalizes a configured host: a DNS name in lower case, or
// an IP address in its canonical form. It refuses ports, schemes, paths
// and wildcards: the Host check compares names, never patterns.
func allowedHost(s string) (string, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	if strings.HasPrefix(name, "[") && strings.HasSuffix(name, "]") {
		name = name[1 : len(name)-1]
	}
	if ip, err := netip.ParseAddr(name); err == nil {
		return ip.Unmap().WithZone("").String(), nil
	}
	if name == "" || len(name) > maxHostName {
		return "", fmt.Errorf("%w: allowed host %q: want a host name or an IP address", ErrConfig, s)
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return "", fmt.Errorf("%w: allowed host %q: want a host name (such as keel.example.com) or an IP address, without a port", ErrConfig, s)
		}
		for _, c := range label {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
				return "", fmt.Errorf("%w: allowed host %q: want a host name (such as keel.example.com) or an IP address, without a port or scheme", ErrConfig, s)
			}
		}
	}
	return name, nil
}

// hostName is the host of a Host header, without its port and the
// brackets of an IPv6 address, in lower case.
func hostName(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	return strings.ToLower(host)
}

// localIP is the IP address the request's connection arrived on (the
// server puts it in the context); invalid when unknown.
func localIP(r *http.Request) netip.Addr {
	switch a := r.Context().Value(http.LocalAddrContextKey).(type) {
	case *net.TCPAddr:
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			return ip.Unmap()
		}
	case net.Addr:
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			return ap.Addr().Unmap().WithZone("")
		}
	}
	return netip.Addr{}
}

// hostAllowed reports whether r's Host header names this listener: a
// configured host, the connection's own IP address, or (on a loopback
// connection) localhost or a loopback IP. An IP address in Host never
// helps an attacker (DNS rebinding needs a name the attacker controls),
// but it must still be this listener's, so that a Host check means the
// same thing whatever the address.
func (g *Guard) hostAllowed(r *http.Request) bool {
	host := hostName(r.Host)
	if host == "" {
		return false
	}
	if g.hosts[host] {
		return true
	}
	local := localIP(r)
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap().WithZone("")
		if g.hosts[ip.String()] {
			return true
		}
		return local.IsValid() && (ip == local || (local.IsLoopback() && ip.IsLoopback()))
	}
	return host == "localhost" && local.IsLoopback()
}
