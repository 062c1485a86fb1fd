// Package openai is keel's provider for OpenAI-compatible Chat Completions
// servers: OpenAI itself, Ollama, vLLM, the llama.cpp server and others that
// speak the same streaming protocol. It is built on the official openai-go
// SDK with the SDK's retries off; failures come back classified by
// provider.Classify.
//
// Text, tool calls (assembled from index-keyed fragments), usage (asked for
// with stream_options.include_usage) and reasoning deltas (the
// "reasoning_content" or "reasoning" field that DeepSeek, vLLM, Ollama and
// llama.cpp add) are streamed as provider.Chunks. Cached prompt tokens
// (prompt_tokens_details.cached_tokens, or DeepSeek's
// prompt_cache_hit_tokens) are reported as cache reads. Requests to OpenAI's
// own API carry a prompt_cache_key, the same for a whole conversation
// (Config.PromptCacheKey sends it elsewhere too, or nowhere).
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
