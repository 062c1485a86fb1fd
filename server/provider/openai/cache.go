package openai

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strings"

	"github.com/keelrun/keel/server/provider"
)

// CacheKeyMode says when a request carries a prompt_cache_key.
type CacheKeyMode string

// The modes of Config.PromptCacheKey.
const (
	// CacheKeyAuto sends the key only to OpenAI's own API (a base URL on
	// api.openai.com): OpenAI-compatible servers may refuse fields they do
	// not know.
	CacheKeyAuto CacheKeyMode = ""
	// CacheKeyOn sends the key to any server.
	CacheKeyOn CacheKeyMode = "on"
	// CacheKeyOff never sends it.
	CacheKeyOff CacheKeyMode = "off"
)

// openAIHost is the host of OpenAI's own API, the one CacheKeyAuto sends
// the key to and whose models CheckInputs knows.
const openAIHost = "api.openai.com"

// sendsCacheKey says whether requests to baseURL carry a prompt_cache_key
// under mode.
func sendsCacheKey(mode CacheKeyMode, baseURL string) bool {
	switch mode {
	case CacheKeyOn:
		return true
	case CacheKeyAuto:
		return isOpenAI(baseURL)
	}
	return false
}

// isOpenAI says whether baseURL is OpenAI's own API.
func isOpenAI(baseURL string) bool {
	u, err := url.Parse(baseURL)
	return err == nil && strings.EqualFold(u.Hostname(), openAIHost)
}

// cacheKey is the request's prompt_cache_key: a hash of what stays the same
// for a whole conversation, the model, the system prompt, the tools and
// the first message, so every request of one conversation has the same key
// and the server routes it to where its prefix is cached, while other
// conversations spread. Only the hash is sent, never the text.
func cacheKey(req provider.Request) string {
	h := sha256.New()
	field := func(b []byte) { // length-prefixed, so fields cannot run together
		h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(b))))
		h.Write(b)
	}
	field([]byte(req.Model))
	field([]byte(req.System))
	for _, t := range req.Tools {
		field([]byte(t.Name))
		field([]byte(t.Description))
		field(t.Parameters)
	}
	if len(req.Messages) > 0 {
		first, _ := json.Marshal(req.Messages[0])
		field(first)
	}
	return "keel-" + hex.EncodeToString(h.Sum(nil)[:16])
}
