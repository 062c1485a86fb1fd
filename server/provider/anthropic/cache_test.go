package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/providertest"
)

// breakpoints lists where a Messages request body carries cache_control,
// in prompt order (tools, system, messages), as paths such as "tools[2]",
// "system[0]" or "messages[3].content[1]"; ttls holds each one's ttl ("" for
// none). It fails t on a breakpoint the API would refuse: on a thinking
// block or an empty text block, more than MaxCacheBreakpoints of them, or
// one that is not {"type":"ephemeral"}.
func breakpoints(t *testing.T, body []byte) (paths, ttls []string) {
	t.Helper()
	var req struct {
		Tools    []map[string]any `json:"tools"`
		System   []map[string]any `json:"system"`
		Messages []struct {
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("request body: %v\n%s", err, body)
	}
	check := func(path string, block map[string]any) {
		cc, ok := block["cache_control"]
		if !ok {
			return
		}
		m, _ := cc.(map[string]any)
		if m["type"] != "ephemeral" || len(m) > 2 {
			t.Errorf("%s: cache_control = %v, want {type: ephemeral}", path, cc)
		}
		switch typ := block["type"]; {
		case typ == "thinking" || typ == "redacted_thinking":
			t.Errorf("%s: cache_control on a %s block", path, typ)
		case typ == "text" && block["text"] == "":
			t.Errorf("%s: cache_control on an empty text block", path)
		}
		ttl, _ := m["ttl"].(string)
		paths, ttls = append(paths, path), append(ttls, ttl)
	}
	for i, b := range req.Tools {
		check(fmt.Sprintf("tools[%d]", i), b)
	}
	for i, b := range req.System {
		check(fmt.Sprintf("system[%d]", i), b)
	}
	for i, m := range req.Messages {
		for j, b := range m.Content {
			check(fmt.Sprintf("messages[%d].content[%d]", i, j), b)
		}
	}
	if len(paths) > MaxCacheBreakpoints {
		t.Errorf("%d breakpoints, the API accepts at most %d: %v", len(paths), MaxCacheBreakpoints, paths)
	}
	return paths, ttls
}

// manyTools is n tool specs.
func manyTools(n int) []keel.ToolSpec {
	tools := make([]keel.ToolSpec, n)
	for i := range tools {
		tools[i] = keel.ToolSpec{Name: fmt.Sprintf("tool_%02d", i), Description: "Tool number " + fmt.Sprint(i) + ".",
			Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)}
	}
	return tools
}

// longLoop is a tool loop of n request/response rounds after a first user
// message: each assistant message calls one tool, each result answers it;
// every third round the user steers after the results.
func longLoop(n int) []keel.Message {
	msgs := []keel.Message{keel.UserMessage("Refactor the package.")}
	for i := range n {
		call := keel.ToolCall{ID: fmt.Sprintf("call_%d", i), Name: "tool_01", Arguments: json.RawMessage(`{"x":"` + fmt.Sprint(i) + `"}`)}
		msgs = append(msgs,
			keel.Message{Role: keel.RoleAssistant, Content: fmt.Sprintf("Step %d.", i), ToolCalls: []keel.ToolCall{call}},
			keel.ToolResultMessage(call, keel.ToolOK, fmt.Sprintf("result %d", i)))
		if i%3 == 2 {
			msgs = append(msgs, keel.UserMessage(fmt.Sprintf("steer %d", i)))
		}
	}
	return msgs
}

func TestCacheBreakpoints(t *testing.T) {
	call := keel.ToolCall{ID: "c1", Name: "list_cities"}
	tests := []struct {
		name string
		cfg  Config
		req  provider.Request
		want []string
		ttl  string
	}{
		{
			name: "transcript",
			req:  weatherTranscript(),
			// The last tool, the system prompt, the user message before the
			// last assistant message (where the previous request ended) and
			// the last message.
			want: []string{"tools[1]", "system[0]", "messages[4].content[0]", "messages[6].content[1]"},
		},
		{
			name: "first turn",
			req: provider.Request{Model: "m", System: "Be brief.", Tools: manyTools(3),
				Messages: []keel.Message{keel.UserMessage("Hello")}},
			want: []string{"tools[2]", "system[0]", "messages[0].content[0]"},
		},
		{
			name: "no tools, no system",
			req:  provider.Request{Model: "m", Messages: []keel.Message{keel.UserMessage("Hello")}},
			want: []string{"messages[0].content[0]"},
		},
		{
			name: "many tools and turns",
			req:  provider.Request{Model: "m", System: "Be brief.", Tools: manyTools(40), Messages: longLoop(30)},
			// 61 messages after merging: the results of round 29 (with the
			// steering of round 29) are the last one.
			want: []string{"tools[39]", "system[0]", "messages[58].content[0]", "messages[60].content[1]"},
		},
		{
			name: "ends with an assistant message",
			req: provider.Request{Model: "m", System: "Be brief.", Messages: []keel.Message{
				keel.UserMessage("Hi"), {Role: keel.RoleAssistant, Content: "Hel", Aborted: true}}},
			want: []string{"system[0]", "messages[0].content[0]", "messages[1].content[0]"},
		},
		{
			// An empty tool result cannot take a breakpoint; the block before
			// it (the call) takes it.
			name: "empty last block",
			req: provider.Request{Model: "m", Messages: []keel.Message{
				keel.UserMessage("Which cities?"),
				{Role: keel.RoleAssistant, ToolCalls: []keel.ToolCall{call}},
				keel.ToolResultMessage(call, keel.ToolOK, ""),
			}},
			want: []string{"messages[0].content[0]", "messages[1].content[0]"},
		},
		{
			name: "one hour",
			cfg:  Config{CacheTTL: CacheTTL1h},
			req:  provider.Request{Model: "m", System: "Be brief.", Messages: []keel.Message{keel.UserMessage("Hello")}},
			want: []string{"system[0]", "messages[0].content[0]"},
			ttl:  "1h",
		},
		{
			name: "disabled",
			cfg:  Config{DisableCache: true},
			req:  weatherTranscript(),
		},
		{
			// A compaction prompt is sent once: caching it only costs.
			name: "compaction",
			req: provider.Request{Model: "m", System: "Summarize.", Compaction: true,
				Messages: []keel.Message{keel.UserMessage("Hi"), {Role: keel.RoleAssistant, Content: "Hello"}, keel.UserMessage("Summarize.")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.SSE(t, "testdata/text.sse"))
			cfg := tt.cfg
			cfg.BaseURL, cfg.APIKey = srv.URL, testKey
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := providertest.Collect(t, p.Stream(context.Background(), tt.req)); err != nil {
				t.Fatal(err)
			}
			got, ttls := breakpoints(t, srv.Last().Body)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("breakpoints (-want +got):\n%s", diff)
			}
			for i, ttl := range ttls {
				if ttl != tt.ttl {
					t.Errorf("%s: ttl %q, want %q", got[i], ttl, tt.ttl)
				}
			}
		})
	}
}

func TestCacheTTLChecked(t *testing.T) {
	for _, ttl := range []string{"", CacheTTL5m, CacheTTL1h} {
		if _, err := New(Config{APIKey: "k", CacheTTL: ttl}); err != nil {
			t.Errorf("CacheTTL %q: %v", ttl, err)
		}
	}
	if _, err := New(Config{APIKey: "k", CacheTTL: "10m"}); !errors.Is(err, ErrBadCacheTTL) {
		t.Errorf("CacheTTL 10m: error %v, want ErrBadCacheTTL", err)
	}
}

// The breakpoints of a conversation move with it: every request's third
// breakpoint sits on the block that was the previous request's last one.
func TestCacheBreakpointsFollowTheConversation(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/text.sse"))
	p := subject.Provider(t, srv.URL)
	full := longLoop(12)
	var lastBefore string
	for n := 1; n <= len(full); n++ {
		if full[n-1].Role != keel.RoleTool && full[n-1].Role != keel.RoleUser {
			continue
		}
		if n < len(full) && full[n].Role != keel.RoleAssistant {
			continue // the request is sent once the user's turn is complete
		}
		req := provider.Request{Model: "m", System: "Be brief.", Tools: manyTools(5), Messages: full[:n]}
		if _, err := providertest.Collect(t, p.Stream(context.Background(), req)); err != nil {
			t.Fatal(err)
		}
		got, _ := breakpoints(t, srv.Last().Body)
		if len(got) < 3 || got[0] != "tools[4]" || got[1] != "system[0]" {
			t.Fatalf("request of %d messages: breakpoints %v", n, got)
		}
		if lastBefore != "" && (len(got) != 4 || got[2] != lastBefore) {
			t.Errorf("request of %d messages: breakpoints %v, want the third on %s", n, got, lastBefore)
		}
		lastBefore = got[len(got)-1]
		if !strings.HasPrefix(lastBefore, "messages[") {
			t.Fatalf("last breakpoint %s is not in the conversation", lastBefore)
		}
	}
}
