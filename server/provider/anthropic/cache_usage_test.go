package anthropic

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/providertest"
)

// cachingServer is a fake Messages endpoint that caches prompts the way the
// API does: the prompt is a sequence of blocks (tools, system, message
// content, in that order); a cache_control breakpoint writes the prefix up
// to its block, if that prefix is at least minCacheTokens long; a request
// reads the longest cached prefix that ends at one of its breakpoints or at
// most cacheLookback blocks before one. It reports usage as the API does:
// cache_read_input_tokens for the prefix read, cache_creation_input_tokens
// for what was written after it up to the last breakpoint, input_tokens for
// the rest. Tokens are counted as a quarter of a block's JSON bytes. It
// refuses what the API refuses: more than MaxCacheBreakpoints breakpoints,
// or one on a thinking or an empty text block.
type cachingServer struct {
	t *testing.T
	// reply answers request n (from 1).
	reply func(n int) cannedReply

	mu     sync.Mutex
	cached map[[32]byte]bool
	turns  []cacheTurn
}

const (
	minCacheTokens = 1024
	cacheLookback  = 20
)

// cannedReply is what the fake model answers: text, or tool calls.
type cannedReply struct {
	text  string
	calls []keel.ToolCall
}

// cacheTurn is what the server computed for one request.
type cacheTurn struct {
	prompt, input, read, write, output int64
	breakpoints                        int
	// readViaLast says the read prefix was found from the last breakpoint
	// alone (within its lookback).
	readViaLast bool
}

func newCachingServer(t *testing.T, reply func(n int) cannedReply) *cachingServer {
	return &cachingServer{t: t, reply: reply, cached: map[[32]byte]bool{}}
}

func (s *cachingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req struct {
		Tools    []map[string]any `json:"tools"`
		System   []map[string]any `json:"system"`
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		refuse(w, "invalid JSON: "+err.Error())
		return
	}
	type block struct {
		key         string
		tokens      int64
		breakpoint  bool
		refusedHere string
	}
	var blocks []block
	add := func(kind string, b map[string]any) {
		_, bp := b["cache_control"]
		delete(b, "cache_control")
		canon, _ := json.Marshal(b) // map keys sorted: canonical
		bl := block{key: kind + ":" + string(canon), tokens: int64((len(canon) + 3) / 4), breakpoint: bp}
		if bp && (b["type"] == "thinking" || b["type"] == "redacted_thinking" || (b["type"] == "text" && b["text"] == "")) {
			bl.refusedHere = fmt.Sprintf("cache_control cannot be set on a %v block", b["type"])
		}
		blocks = append(blocks, bl)
	}
	for _, b := range req.Tools {
		add("tool", b)
	}
	for _, b := range req.System {
		add("system", b)
	}
	for _, m := range req.Messages {
		for _, b := range m.Content {
			add(m.Role, b)
		}
	}

	// Prefix i is blocks[0..i]: its hash chains the block keys, its tokens
	// add up.
	hashes := make([][32]byte, len(blocks))
	sums := make([]int64, len(blocks))
	var h [32]byte
	var sum int64
	var bps []int
	for i, b := range blocks {
		if b.refusedHere != "" {
			refuse(w, b.refusedHere)
			return
		}
		h = sha256.Sum256(append(h[:], b.key...))
		sum += b.tokens
		hashes[i], sums[i] = h, sum
		if b.breakpoint {
			bps = append(bps, i)
		}
	}
	if len(bps) > MaxCacheBreakpoints {
		refuse(w, fmt.Sprintf("A maximum of %d blocks with cache_control may be provided. Found %d.", MaxCacheBreakpoints, len(bps)))
		return
	}

	s.mu.Lock()
	turn := cacheTurn{prompt: sum, breakpoints: len(bps)}
	// found is the longest cached prefix that breakpoint bp reaches.
	found := func(bp int) int {
		for j := bp; j >= 0 && j >= bp-cacheLookback; j-- {
			if s.cached[hashes[j]] {
				return j
			}
		}
		return -1
	}
	hit := -1
	for _, bp := range bps {
		hit = max(hit, found(bp))
	}
	turn.readViaLast = hit >= 0 && found(bps[len(bps)-1]) == hit
	if hit >= 0 {
		turn.read = sums[hit]
	}
	for _, bp := range bps {
		if bp > hit && sums[bp] >= minCacheTokens {
			s.cached[hashes[bp]] = true
			turn.write = sums[bp] - turn.read
		}
	}
	turn.input = sum - turn.read - turn.write
	n := len(s.turns) + 1
	reply := s.reply(n)
	turn.output = replyTokens(reply)
	s.turns = append(s.turns, turn)
	s.mu.Unlock()

	providertest.SSEEvents(replyEvents(n, turn, reply)...)(w, r)
}

func (s *cachingServer) log() []cacheTurn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]cacheTurn(nil), s.turns...)
}

func refuse(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	b, _ := json.Marshal(map[string]any{"type": "error",
		"error": map[string]any{"type": "invalid_request_error", "message": msg}})
	_, _ = w.Write(b)
}

func replyTokens(r cannedReply) int64 {
	n := len(r.text)
	for _, c := range r.calls {
		n += len(c.Name) + len(c.Arguments) + 20
	}
	return int64((n + 3) / 4)
}

// replyEvents is the event stream of reply, with usage as the API reports
// it: the input side in message_start, the cumulative counts again in
// message_delta.
func replyEvents(n int, turn cacheTurn, reply cannedReply) []string {
	ev := func(typ string, v map[string]any) string {
		v["type"] = typ
		b, _ := json.Marshal(v)
		return "event: " + typ + "\ndata: " + string(b) + "\n\n"
	}
	usage := func(output int64) map[string]any {
		return map[string]any{"input_tokens": turn.input, "cache_creation_input_tokens": turn.write,
			"cache_read_input_tokens": turn.read, "output_tokens": output}
	}
	out := []string{ev("message_start", map[string]any{"message": map[string]any{
		"id": fmt.Sprintf("msg_%02d", n), "type": "message", "role": "assistant", "content": []any{},
		"model": "claude-test", "stop_reason": nil, "stop_sequence": nil, "usage": usage(1)}})}
	idx := 0
	if reply.text != "" {
		out = append(out,
			ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "text", "text": ""}}),
			ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "text_delta", "text": reply.text}}),
			ev("content_block_stop", map[string]any{"index": idx}))
		idx++
	}
	for _, c := range reply.calls {
		out = append(out,
			ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{
				"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}}),
			ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{
				"type": "input_json_delta", "partial_json": string(c.Arguments)}}),
			ev("content_block_stop", map[string]any{"index": idx}))
		idx++
	}
	stop := "end_turn"
	if len(reply.calls) > 0 {
		stop = "tool_use"
	}
	return append(out,
		ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
			"usage": usage(turn.output)}),
		ev("message_stop", map[string]any{}))
}

// agentReply is the fake model's side of a 20-request coding session: one
// tool call a request, text every fifth request (the user then writes
// again), and at request 8 a batch of 25 parallel calls, whose 50 new blocks
// put the previous request's end beyond the last breakpoint's lookback.
func agentReply(n int) cannedReply {
	switch {
	case n%5 == 0:
		return cannedReply{text: fmt.Sprintf("Part %d is done: the tests pass and the change is committed.", n/5)}
	case n == 8:
		var calls []keel.ToolCall
		for i := range 25 {
			calls = append(calls, keel.ToolCall{ID: fmt.Sprintf("toolu_%02d_%02d", n, i), Name: "read_file",
				Arguments: json.RawMessage(fmt.Sprintf(`{"path":"pkg/file%02d.go"}`, i))})
		}
		return cannedReply{calls: calls}
	}
	return cannedReply{text: "Looking.", calls: []keel.ToolCall{{ID: fmt.Sprintf("toolu_%02d", n), Name: "read_file",
		Arguments: json.RawMessage(fmt.Sprintf(`{"path":"pkg/step%02d.go"}`, n))}}}
}

// agentSession plays the 20 requests against a caching server with cfg
// and returns the sum of the usage the provider reported, and what the
// server computed for each request.
func agentSession(t *testing.T, cfg Config) (keel.Usage, []cacheTurn) {
	t.Helper()
	cs := newCachingServer(t, agentReply)
	srv := httptest.NewServer(cs)
	t.Cleanup(srv.Close)
	cfg.BaseURL, cfg.APIKey = srv.URL, testKey
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var tools []keel.ToolSpec
	for _, name := range []string{"read_file", "write_file", "edit_file", "list_dir", "grep", "run_tests", "git_diff", "git_commit"} {
		tools = append(tools, keel.ToolSpec{Name: name,
			Description: "The " + name + " tool. " + strings.Repeat("It does what its name says, inside the workspace only. ", 4),
			Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"text":{"type":"string"}}}`)})
	}
	req := provider.Request{
		Model:    "claude-test",
		System:   "You are a careful coding agent. " + strings.Repeat("Read before you write; run the tests after every change; keep diffs small. ", 80),
		Tools:    tools,
		Messages: []keel.Message{keel.UserMessage("Add a --json flag to the report command.")},
	}
	var total keel.Usage
	for n := 1; n <= 20; n++ {
		chunks, err := providertest.Collect(t, p.Stream(context.Background(), req))
		if err != nil {
			t.Fatalf("request %d: %v", n, err)
		}
		resp, err := providertest.Assemble(chunks).Response()
		if err != nil {
			t.Fatalf("request %d: %v", n, err)
		}
		total = total.Add(resp.Usage)
		req.Messages = append(req.Messages, keel.Message{Role: keel.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls})
		for _, c := range resp.ToolCalls {
			req.Messages = append(req.Messages, keel.ToolResultMessage(c, keel.ToolOK,
				fmt.Sprintf("// %s of request %d\n", c.Arguments, n)+strings.Repeat("func f() { return }\n", 12)))
		}
		if len(resp.ToolCalls) == 0 {
			req.Messages = append(req.Messages, keel.UserMessage(fmt.Sprintf("Good. Now part %d.", n/5+1)))
		}
	}
	return total, cs.log()
}

// A 20-request session against a server that caches as the API does: with
// the breakpoints every request after the first reads the whole previous
// prompt back and writes only what the turn added; without them nothing is
// cached. keel's InputTokens is the whole prompt either way.
func TestCacheTwentyTurnSession(t *testing.T) {
	cached, turns := agentSession(t, Config{})
	uncached, plain := agentSession(t, Config{DisableCache: true})

	for i, turn := range turns {
		n := i + 1
		if turn.input != 0 {
			t.Errorf("request %d: %d input tokens outside the cache, want 0 (the last block is a breakpoint)", n, turn.input)
		}
		if n == 1 {
			if turn.read != 0 || turn.write != turn.prompt {
				t.Errorf("request 1: read %d, wrote %d of %d, want the whole prompt written", turn.read, turn.write, turn.prompt)
			}
			continue
		}
		if prev := turns[i-1].prompt; turn.read != prev || turn.write != turn.prompt-prev {
			t.Errorf("request %d: read %d, wrote %d of %d; want the previous prompt (%d) read, the rest written",
				n, turn.read, turn.write, turn.prompt, prev)
		}
		// After the batch of 25 calls only the breakpoint on the previous
		// request's end reaches the cached prefix.
		if n == 9 && turn.readViaLast {
			t.Error("request 9: the prefix was in the last breakpoint's lookback; the test no longer covers the third breakpoint")
		}
	}
	for i, turn := range plain {
		if turn.breakpoints != 0 || turn.read != 0 || turn.write != 0 || turn.prompt != turns[i].prompt {
			t.Errorf("uncached request %d: %+v, want no breakpoints and the prompt of %d uncached", i+1, turn, turns[i].prompt)
		}
	}

	t.Logf("with caching:    %+v", cached)
	t.Logf("without caching: %+v", uncached)
	// The totals, for pricing: cache writes cost more than plain input,
	// cache reads much less.
	wantCached := keel.Usage{InputTokens: 101436, OutputTokens: 632, CacheReadTokens: 94151, CacheWriteTokens: 7285, Requests: 20}
	wantUncached := keel.Usage{InputTokens: 101436, OutputTokens: 632, Requests: 20}
	if diff := cmp.Diff(wantCached, cached); diff != "" {
		t.Errorf("usage with caching (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantUncached, uncached); diff != "" {
		t.Errorf("usage without caching (-want +got):\n%s", diff)
	}
	if cached.InputTokens != cached.CacheReadTokens+cached.CacheWriteTokens {
		t.Errorf("usage with caching = %+v: input is not all cache reads and writes", cached)
	}
}
