// Package anthropic is keel's provider for the Anthropic Messages API, built
// on the official anthropic-sdk-go with the SDK's retries off; failures,
// including error events inside a stream (overloaded_error and the like),
// come back classified by provider.Classify.
//
// Text deltas, tool use (tool_use blocks whose input streams as
// input_json_delta fragments), thinking deltas (as reasoning) and usage
// (from message_start and message_delta, with cache reads and writes) are
// streamed as provider.Chunks. Stop reasons map to keel's finish reasons:
// end_turn, stop_sequence and pause_turn to stop, tool_use to tool_calls,
// max_tokens and model_context_window_exceeded to length, refusal to
// content_filter.
//
// Prompt caching is on unless Config.DisableCache: each request marks its
// stable prefix with cache_control breakpoints (at most four: the last
// tool, the system prompt, the end of the previous request's prompt and
// the end of this one), so the next request of a conversation reads
// everything it shares with this one from the cache.
//
// Attachments (keel.Attachment) go as image and document blocks with
// base64 sources, after their message's text or inside its tool result;
// CheckInputs says which models read them (Config.Inputs overrides).
//
// Example:
//
//	p, err := anthropic.New(anthropic.FromEnv()) // ANTHROPIC_API_KEY
//	if err != nil {
//		return err
//	}
//	var asm provider.Assembler
//	for chunk, err := range p.Stream(ctx, provider.Request{
//		Model:    "claude-sonnet-4-5",
//		System:   "Be brief.",
//		Messages: []keel.Message{keel.UserMessage("Hello")},
//	}) {
//		if err != nil {
//			return err // *keel.ProviderError, *provider.MalformedError or ctx.Err()
//		}
//		asm.Add(chunk)
//	}
//	resp, err := asm.Response()
package anthropic
