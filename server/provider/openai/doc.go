// Package openai is keel's provider for OpenAI-compatible Chat Completions
// servers: OpenAI itself, Ollama, vLLM, the llama.cpp server and others that
// speak the same streaming protocol, and for OpenAI's Responses API
// (Config.API). It is built on the official openai-go SDK with the SDK's
// retries off; failures come back classified by provider.Classify.
//
// Text, tool calls (assembled from index-keyed fragments), usage (asked for
// with stream_options.include_usage) and reasoning deltas (the
// "reasoning_content" or "reasoning" field that DeepSeek, vLLM, Ollama and
// llama.cpp add) are streamed as provider.Chunks. Cached prompt tokens
// (prompt_tokens_details.cached_tokens, or DeepSeek's
// prompt_cache_hit_tokens) are reported as cache reads. Requests to OpenAI's
// own API carry a prompt_cache_key, the same for a whole conversation
// (Config.PromptCacheKey sends it elsewhere too, or nowhere). A reasoning
// effort goes as reasoning_effort; a token budget is refused.
//
// On the Responses API keel stays the only keeper of the transcript:
// requests are not stored (store: false) and name no earlier response.
// The model's reasoning items come back with their encrypted content
// (include: reasoning.encrypted_content, asked for whenever reasoning is
// requested or kept) as keel.ReasoningParts, their summaries streamed as
// reasoning, and go back before their message's text and function calls
// in later requests. Hosted tools (Config.HostedTools: web search, file
// search, code interpreter) run on OpenAI's side; each use is yielded as a
// keel.HostedToolActivity, and completed web searches are counted in
// keel.Usage.WebSearches.
//
// Attachments (keel.Attachment) go as data URLs: image_url and file
// parts on Chat Completions (a tool result's in a user message after its
// batch), input_image and input_file on the Responses API (a tool
// result's in its function_call_output). CheckInputs knows OpenAI's own
// models; other servers' models read what Config.Inputs declares.
//
// Example:
//
//	p, err := openai.New(openai.Config{BaseURL: "http://localhost:11434/v1"}) // Ollama, no key
//	if err != nil {
//		return err
//	}
//	var asm provider.Assembler
//	for chunk, err := range p.Stream(ctx, provider.Request{
//		Model:    "qwen3:8b",
//		Messages: []keel.Message{keel.UserMessage("Hello")},
//	}) {
//		if err != nil {
//			return err // *keel.ProviderError, *provider.MalformedError or ctx.Err()
//		}
//		asm.Add(chunk)
//	}
//	resp, err := asm.Response()
package openai
