package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/providertest"
)

var noGeneration = keel.GenerationTokens{Kind: keel.GenerationNone}

func TestStreamFixtures(t *testing.T) {
	thought := keel.ReasoningPart{Provider: Name, Text: "27 * 453: 27*400 + 27*53.",
		Signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}
	providertest.CheckStreams(t, subject, []providertest.Stream{
		{
			// Usage from message_start (input with cache) and message_delta
			// (output); ping events are skipped.
			Fixture: "text.sse",
			Chunks: []provider.Chunk{
				providertest.UsageChunk(keel.Usage{InputTokens: 525, OutputTokens: 1, CacheReadTokens: 400, CacheWriteTokens: 100}),
				{Text: "Hello"}, {Text: ", world!"}, {Finish: provider.FinishStop},
				providertest.UsageChunk(keel.Usage{InputTokens: 525, OutputTokens: 12, CacheReadTokens: 400, CacheWriteTokens: 100}),
			},
			Response: &provider.Response{Text: "Hello, world!", Finish: provider.FinishStop,
				Usage:      keel.Usage{InputTokens: 525, OutputTokens: 12, CacheReadTokens: 400, CacheWriteTokens: 100, Requests: 1},
				Generation: noGeneration},
		},
		{
			Fixture: "tool_use.sse",
			Chunks: []provider.Chunk{
				providertest.UsageChunk(keel.Usage{InputTokens: 300, OutputTokens: 2}),
				{Text: "Checking both."},
				providertest.ToolCallChunk(0, "toolu_paris", "get_weather", ""),
				providertest.ToolCallChunk(0, "", "", `{"ci`),
				providertest.ToolCallChunk(0, "", "", `ty": "Par`),
				providertest.ToolCallChunk(0, "", "", `is"}`),
				providertest.ToolCallChunk(1, "toolu_rome", "get_weather", ""),
				providertest.ToolCallChunk(1, "", "", `{"city": "Ro`),
				providertest.ToolCallChunk(1, "", "", `me"}`),
				{Finish: provider.FinishToolCalls},
				providertest.UsageChunk(keel.Usage{InputTokens: 300, OutputTokens: 70}),
			},
			Response: &provider.Response{
				Text: "Checking both.",
				ToolCalls: []keel.ToolCall{
					{ID: "toolu_paris", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris"}`)},
					{ID: "toolu_rome", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Rome"}`)},
				},
				Finish:     provider.FinishToolCalls,
				Usage:      keel.Usage{InputTokens: 300, OutputTokens: 70, Requests: 1},
				Generation: noGeneration,
			},
		},
		{
			// Streamed thinking: all 90 output tokens fall in the window.
			Fixture: "thinking.sse",
			Chunks: []provider.Chunk{
				providertest.UsageChunk(keel.Usage{InputTokens: 40, OutputTokens: 3}),
				{Reasoning: "27 * 453: "}, {Reasoning: "27*400 + 27*53."},
				{ReasoningPart: &thought}, {Text: "12231"},
				{Finish: provider.FinishStop},
				providertest.UsageChunk(keel.Usage{InputTokens: 40, OutputTokens: 90, ReasoningTokens: 80}),
				providertest.GenerationChunk(keel.GenerationReported, 90),
			},
			Response: &provider.Response{Text: "12231", Finish: provider.FinishStop,
				Usage:      keel.Usage{InputTokens: 40, OutputTokens: 90, ReasoningTokens: 80, Requests: 1},
				Generation: keel.GenerationTokens{Kind: keel.GenerationReported, N: 90},
				Reasoning:  []keel.ReasoningPart{thought}},
		},
		{
			// Thinking that never streamed: its 100 tokens precede the window.
			Fixture: "hidden_thinking.sse",
			Response: &provider.Response{Text: "Yes.", Finish: provider.FinishStop,
				Usage:      keel.Usage{InputTokens: 40, OutputTokens: 120, ReasoningTokens: 100, Requests: 1},
				Generation: keel.GenerationTokens{Kind: keel.GenerationReported, N: 20},
				Reasoning:  []keel.ReasoningPart{{Provider: Name, Signature: "EqQBCgIYAhIMsig"}}},
		},
		{
			// Redacted thinking without a token split: no usable count.
			Fixture: "redacted.sse",
			Response: &provider.Response{Text: "Done.", Finish: provider.FinishLength,
				Usage:      keel.Usage{InputTokens: 40, OutputTokens: 50, Requests: 1},
				Generation: keel.GenerationTokens{Kind: keel.GenerationUnavailable},
				Reasoning: []keel.ReasoningPart{{Provider: Name, Redacted: true,
					Signature: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"}}},
		},
		{
			// Text in content_block_start itself; refusal maps to content_filter.
			Fixture: "refusal.sse",
			Response: &provider.Response{Text: "I can't help with that.", Finish: provider.FinishContentFilter,
				Usage: keel.Usage{InputTokens: 10, OutputTokens: 6, Requests: 1}, Generation: noGeneration},
		},
		{
			// Tool input sent whole in content_block_start, without deltas.
			Fixture: "start_input.sse",
			Response: &provider.Response{
				ToolCalls: []keel.ToolCall{{ID: "toolu_whole", Name: "read_file", Arguments: json.RawMessage(`{"path":"notes.txt"}`)}},
				Finish:    provider.FinishToolCalls,
				Usage:     keel.Usage{InputTokens: 10, OutputTokens: 20, Requests: 1}, Generation: noGeneration,
			},
		},
		{
			// The stop reason arrived; losing message_stop does not throw the
			// answer away.
			Fixture: "stop_then_cut.sse",
			Response: &provider.Response{Text: "Complete.", Finish: provider.FinishStop,
				Usage: keel.Usage{InputTokens: 10, OutputTokens: 3, Requests: 1}, Generation: noGeneration},
		},
		{Fixture: "no_stop_reason.sse", Malformed: true},
		{Fixture: "malformed_tool.sse", Malformed: true},
	})
}

func TestStreamFailures(t *testing.T) {
	providertest.CheckStreamFailures(t, subject, []providertest.StreamFailure{
		{Fixture: "cut.sse", Kind: keel.ProviderStreamCut, Retryable: true, Partial: "The answer is"},
		{Fixture: "ended_early.sse", Kind: keel.ProviderStreamCut, Retryable: true, Partial: "The answer"},
		{Fixture: "error_overloaded.sse", Kind: keel.ProviderOverloaded, Retryable: true, Message: "Overloaded (overloaded_error)", Partial: "Partial"},
		{Fixture: "error_api.sse", Kind: keel.ProviderServer, Retryable: true, Message: "Internal server error"},
		{Fixture: "error_invalid.sse", Kind: keel.ProviderInvalidRequest, Message: "prompt is too long"},
	})

	t.Run("bad_event.sse", func(t *testing.T) {
		srv := providertest.NewServer(t, providertest.SSE(t, "testdata/bad_event.sse"))
		_, err := providertest.Collect(t, subject.Provider(t, srv.URL).Stream(context.Background(), subject.Request))
		var mal *provider.MalformedError
		if !errors.As(err, &mal) {
			t.Fatalf("stream error = %T %v, want *provider.MalformedError", err, err)
		}
	})
}
