package provider

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// CheckEndpoint validates a provider's base URL and API key. The URL must
// be an absolute http or https URL, else it returns badURL (wrapped with
// the URL). The key may be empty only when the URL names a local or
// private-network host (a model server on this machine or a proxy that
// holds the key itself), else it returns noKey.
func CheckEndpoint(baseURL, apiKey string, badURL, noKey error) error {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: %q", badURL, baseURL)
	}
	if apiKey == "" && !IsLocal(u) {
		return noKey
	}
	return nil
}

// IsLocal reports whether u names a host that plausibly needs no API key:
// loopback, private, link-local or unspecified addresses, localhost,
// *.local, *.internal, or a single-label name such as a compose service.
func IsLocal(u *url.URL) bool {
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsUnspecified()
	}
	return host == "localhost" || !strings.Contains(host, ".") ||
		strings.HasSuffix(host, ".localhost") || strings.HasSuffix(host, ".local") ||
		strings.HasSuffix(host, ".internal")
}
