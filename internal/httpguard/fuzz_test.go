package httpguard

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// FuzzHost checks the Host rule on any Host header and local address: a
// host that is a name (not an IP address) passes only when it is a
// configured name, or localhost on a loopback connection; an IP address
// passes only when configured, the connection's own, or loopback on
// loopback. No name an attacker can register gets through.
func FuzzHost(f *testing.F) {
	for _, s := range [][2]string{
		{"rb.example", "127.0.0.1"}, {"localhost:7280", "127.0.0.1"}, {"[::1]:7280", "::1"},
		{"keel.example", "10.0.0.1"}, {"10.0.0.1:80", "10.0.0.1"}, {"LOCALHOST", "192.168.1.5"},
		{"[::ffff:127.0.0.1]", "::ffff:127.0.0.1"}, {"[fe80::1%25eth0]", "fe80::1"}, {"", "127.0.0.1"},
		{"keel.example.", "127.0.0.1"}, {"a:b:c", "127.0.0.1"},
	} {
		f.Add(s[0], s[1])
	}
	g, err := New(Options{AllowedHosts: []string{"keel.example", "10.9.8.7"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, host, local string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Host = host
		lip, lerr := netip.ParseAddr(local)
		if lerr == nil {
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey,
				&net.TCPAddr{IP: net.IP(lip.AsSlice()), Zone: lip.Zone()}))
		}
		allowed := g.Check(r) == nil
		if !allowed {
			return
		}
		name := hostName(host)
		if name == "keel.example" || name == "10.9.8.7" {
			return
		}
		loop := lerr == nil && lip.Unmap().IsLoopback()
		ip, err := netip.ParseAddr(name)
		if err != nil {
			if name != "localhost" || !loop {
				t.Fatalf("Host %q passed on local address %q", host, local)
			}
			return
		}
		ip = ip.Unmap().WithZone("")
		if ip.String() != "10.9.8.7" && !(lerr == nil && ip == lip.Unmap().WithZone("")) && !(loop && ip.IsLoopback()) {
			t.Fatalf("Host %q (IP %s) passed on local address %q", host, ip, local)
		}
	})
}

// FuzzContentType: RequireJSON passes only application/json with at most
// a utf-8 charset, whatever the header holds, and never panics.
func FuzzContentType(f *testing.F) {
	for _, s := range []string{"application/json", "application/json; charset=utf-8", "text/plain", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=--x", "application/json; charset=\"utf-8\"; x=y", "APPLICATION/JSON", ";;", "application/json\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ct string) {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.Header["Content-Type"] = []string{ct}
		if RequireJSON(r) != nil {
			return
		}
		mt, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(ct)), ";")
		if strings.TrimSpace(mt) != "application/json" {
			t.Fatalf("Content-Type %q passed", ct)
		}
	})
}
