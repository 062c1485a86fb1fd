package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/providertest"
)

// toServer sends every request to srv, whatever host its URL names, so a
// provider configured for api.openai.com talks to the test server.
type toServer struct{ srv *url.URL }

func (ts toServer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host = ts.srv.Scheme, ts.srv.Host
	return http.DefaultTransport.RoundTrip(r)
}

// sentCacheKey is the prompt_cache_key of a request body, and whether it
// had one.
func sentCacheKey(t *testing.T, body []byte) (string, bool) {
	t.Helper()
	var b map[string]any
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("request body: %v", err)
	}
	v, ok := b["prompt_cache_key"]
	if !ok {
		return "", false
	}
	s, isString := v.(string)
	if !isString {
		t.Fatalf("prompt_cache_key = %v, want a string", v)
	}
	return s, true
}

func cacheRequest() provider.Request {
	return provider.Request{
		Model:  "gpt-test",
		System: "You are a coding agent. The secret word is PLUGH.",
		Tools: []keel.ToolSpec{{Name: "read_file", Description: "Read a file.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}},
		Messages: []keel.Message{keel.UserMessage("Fix the build.")},
	}
}

// The key is sent to OpenAI's own API by default and to other servers only
// when asked: an OpenAI-compatible server may refuse a field it does not
// know.
func TestPromptCacheKeySentWhereTaken(t *testing.T) {
	tests := []struct {
		name    string
		mode    CacheKeyMode
		openai  bool // the base URL is OpenAI's
		wantKey bool
	}{
		{"auto, OpenAI", CacheKeyAuto, true, true},
		{"auto, compatible server", CacheKeyAuto, false, false},
		{"on, compatible server", CacheKeyOn, false, true},
		{"off, OpenAI", CacheKeyOff, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.SSE(t, "testdata/text.sse"))
			cfg := Config{BaseURL: srv.URL + "/v1", APIKey: testKey, PromptCacheKey: tt.mode}
			if tt.openai {
				u, _ := url.Parse(srv.URL)
				cfg.BaseURL, cfg.HTTPClient = DefaultBaseURL, &http.Client{Transport: toServer{u}}
			}
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := providertest.Collect(t, p.Stream(context.Background(), cacheRequest())); err != nil {
				t.Fatal(err)
			}
			got := srv.Last()
			if got.Path != "/v1/chat/completions" {
				t.Fatalf("path %s", got.Path)
			}
			key, ok := sentCacheKey(t, got.Body)
			if ok != tt.wantKey {
				t.Fatalf("prompt_cache_key sent = %v (%q), want %v", ok, key, tt.wantKey)
			}
		})
	}
}

func TestPromptCacheKeyMode(t *testing.T) {
	if _, err := New(Config{APIKey: "k", PromptCacheKey: "always"}); !errors.Is(err, ErrBadCacheKeyMode) {
		t.Errorf("mode always: error %v, want ErrBadCacheKeyMode", err)
	}
}

// Every request of a conversation has the same key; another system prompt,
// other tools, another model or another first message make another one.
// The key is a hash: none of the prompt's text is in it.
func TestPromptCacheKeyStable(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/text.sse"))
	p, err := New(Config{BaseURL: srv.URL + "/v1", APIKey: testKey, PromptCacheKey: CacheKeyOn})
	if err != nil {
		t.Fatal(err)
	}
	keyOf := func(req provider.Request) string {
		t.Helper()
		if _, err := providertest.Collect(t, p.Stream(context.Background(), req)); err != nil {
			t.Fatal(err)
		}
		key, ok := sentCacheKey(t, srv.Last().Body)
		if !ok {
			t.Fatal("no prompt_cache_key")
		}
		return key
	}

	req := cacheRequest()
	first := keyOf(req)
	if !strings.HasPrefix(first, "keel-") || len(first) != len("keel-")+32 || strings.Contains(first, "PLUGH") {
		t.Errorf("key %q, want keel- and 32 hex digits", first)
	}
	call := keel.ToolCall{ID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path":"main.go"}`)}
	for i := range 3 {
		req.Messages = append(req.Messages,
			keel.Message{Role: keel.RoleAssistant, Content: fmt.Sprint("Step ", i), ToolCalls: []keel.ToolCall{call}},
			keel.ToolResultMessage(call, keel.ToolOK, "package main"))
		if got := keyOf(req); got != first {
			t.Errorf("request %d of the conversation: key %q, want %q", i+2, got, first)
		}
	}

	others := map[string]func(*provider.Request){
		"system":        func(r *provider.Request) { r.System += " Be brief." },
		"tools":         func(r *provider.Request) { r.Tools = nil },
		"model":         func(r *provider.Request) { r.Model = "gpt-other" },
		"first message": func(r *provider.Request) { r.Messages[0] = keel.UserMessage("Fix the tests.") },
	}
	for name, change := range others {
		r := cacheRequest()
		change(&r)
		if got := keyOf(r); got == first {
			t.Errorf("another %s: the same key %q", name, got)
		}
	}
}

// cachedUsage is the stream of a one-word answer whose usage reports cached
// prompt tokens the way OpenAI does (prompt_tokens_details.cached_tokens,
// part of prompt_tokens) or the way DeepSeek does (prompt_cache_hit_tokens
// beside prompt_cache_miss_tokens).
func cachedUsage(prompt, cached int64, deepseek bool) http.HandlerFunc {
	u := map[string]any{"prompt_tokens": prompt, "completion_tokens": 3, "total_tokens": prompt + 3,
		"prompt_tokens_details": map[string]any{"cached_tokens": cached}}
	if deepseek {
		u["prompt_tokens_details"] = map[string]any{"cached_tokens": 0}
		u["prompt_cache_hit_tokens"], u["prompt_cache_miss_tokens"] = cached, prompt-cached
	}
	chunk := func(v map[string]any) string {
		v["id"], v["object"], v["created"], v["model"] = "chatcmpl-c", "chat.completion.chunk", 1767225600, "gpt-test"
		b, _ := json.Marshal(v)
		return "data: " + string(b) + "\n\n"
	}
	return providertest.SSEEvents(
		chunk(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": "Done."}, "finish_reason": nil}}}),
		chunk(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}}),
		chunk(map[string]any{"choices": []any{}, "usage": u}),
		"data: [DONE]\n\n",
	)
}

// Cached prompt tokens reach keel.Usage as cache reads, within the input
// count, whichever field the server reports them in; over a conversation
// they add up.
func TestCachedTokensRead(t *testing.T) {
	for _, deepseek := range []bool{false, true} {
		t.Run(fmt.Sprint("deepseek=", deepseek), func(t *testing.T) {
			// Three requests: the first finds nothing cached, the next ones
			// the previous prompt (in steps of 128 tokens, as OpenAI caches).
			srv := providertest.NewServer(t,
				cachedUsage(1200, 0, deepseek), cachedUsage(1500, 1152, deepseek), cachedUsage(1900, 1408, deepseek))
			p := subject.Provider(t, srv.URL)
			var total keel.Usage
			for range 3 {
				chunks, err := providertest.Collect(t, p.Stream(context.Background(), subject.Request))
				if err != nil {
					t.Fatal(err)
				}
				resp, err := providertest.Assemble(chunks).Response()
				if err != nil {
					t.Fatal(err)
				}
				total = total.Add(resp.Usage)
			}
			if total.InputTokens != 4600 || total.CacheReadTokens != 2560 || total.CacheWriteTokens != 0 ||
				total.OutputTokens != 9 || total.Requests != 3 {
				t.Errorf("usage = %+v, want input 4600 with 2560 cache reads, output 9, 3 requests", total)
			}
		})
	}
}
