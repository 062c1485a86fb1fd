package gateway

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"sync"
)

// interopState is what the MCP and A2A endpoints keep (docs/interop.md).
type interopState struct {
	once sync.Once
	// secret signs the MCP session IDs the gateway hands out, binding
	// each to the API key that opened it.
	secret [32]byte
	mcp    http.Handler
}

// routeInterop mounts the endpoints other agents and tools call: MCP at
// /v1/mcp and A2A under /v1/a2a. They name their sessions in their
// bodies (or make new ones under the key's prefix) and check them
// themselves.
func (g *Gateway) routeInterop() {
	g.interop.mcp = g.newMCPHandler()
	for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		g.handle(Route{Method: m, Path: "/v1/mcp", sessions: true}, http.HandlerFunc(g.serveMCP))
	}
	g.routeA2A()
}

// bindingTag is the part of an MCP session ID that binds it to a key: an
// HMAC of the ID's random part and the key's hash, so a key cannot use
// another key's MCP session even when it learns its ID.
func (g *Gateway) bindingTag(nonce string, k *keyEntry) string {
	g.interop.once.Do(func() {
		if _, err := rand.Read(g.interop.secret[:]); err != nil {
			panic("gateway: no randomness: " + err.Error())
		}
	})
	m := hmac.New(sha256.New, g.interop.secret[:])
	m.Write([]byte(nonce))
	if k != nil {
		m.Write(k.sum[:])
	}
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// mcpSessionID makes an MCP session ID for key k.
func (g *Gateway) mcpSessionID(k *keyEntry) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("gateway: no randomness: " + err.Error())
	}
	nonce := hex.EncodeToString(b[:])
	return nonce + g.bindingTag(nonce, k)
}

// ownsMCPSession reports whether id is an MCP session ID the gateway made
// for key k.
func (g *Gateway) ownsMCPSession(id string, k *keyEntry) bool {
	if len(id) != 64 {
		return false
	}
	return hmac.Equal([]byte(id[32:]), []byte(g.bindingTag(id[:32], k)))
}
