package openai

import (
	"encoding/json"
	"fmt"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
)

// params maps a keel request onto Chat Completions parameters.
func (p *Provider) params(req provider.Request) (oai.ChatCompletionNewParams, error) {
	if req.Model == "" {
		return oai.ChatCompletionNewParams{}, &keel.ProviderError{Provider: Name,
			Kind: keel.ProviderUnknownModel, Message: "no model given (use openai:MODEL)"}
	}
	effort, err := reasoningEffort(p.reasoning(req))
	if err != nil {
		return oai.ChatCompletionNewParams{}, err
	}
	native := provider.AnswerSchema(req.OutputSchema)
	system := req.System
	if native == nil {
		system = provider.WithInstruction(system, req.OutputSchema)
	}
	msgs, err := messages(system, req.Messages)
	if err != nil {
		return oai.ChatCompletionNewParams{}, err
	}
	tools, err := toolParams(req.Tools)
	if err != nil {
		return oai.ChatCompletionNewParams{}, err
	}
	params := oai.ChatCompletionNewParams{
		Model:    req.Model,
		Messages: msgs,
		Tools:    tools,
		// The usage chunk before [DONE] is the only place a stream reports
		// token counts.
		StreamOptions:   oai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)},
		ReasoningEffort: effort,
	}
	if limit := cmpOr(req.MaxTokens, p.cfg.MaxTokens); limit > 0 {
		if p.cfg.LegacyMaxTokens {
			params.MaxTokens = param.NewOpt(int64(limit))
		} else {
			params.MaxCompletionTokens = param.NewOpt(int64(limit))
		}
	}
	if native != nil {
		// Structured outputs, not strict: strict mode takes only a
		// subset of JSON Schema, and keel validates the answer anyway
		// (docs/contract.md §21.1).
		schema, err := answerSchema(native)
		if err != nil {
			return oai.ChatCompletionNewParams{}, err
		}
		params.ResponseFormat = oai.ChatCompletionNewParamsResponseFormatUnion{
			OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
				Name: "answer", Schema: schema, Strict: param.NewOpt(false)}},
		}
	}
	if p.cacheKey {
		params.PromptCacheKey = param.NewOpt(cacheKey(req))
	}
	return params, nil
}

// noBudget says why a reasoning budget is refused.
const noBudget = "reasoning: OpenAI takes an effort (minimal, low, medium or high), not a token budget"

// reasoningEffort is the effort r asks for, "" for none. A budget, which
// neither API takes, is refused before anything is sent.
func reasoningEffort(r keel.Reasoning) (shared.ReasoningEffort, error) {
	if err := r.Validate(); err != nil {
		return "", &keel.ProviderError{Provider: Name, Kind: keel.ProviderInvalidRequest, Message: err.Error()}
	}
	if r.BudgetTokens != 0 {
		return "", &keel.ProviderError{Provider: Name, Kind: keel.ProviderInvalidRequest, Message: noBudget}
	}
	return shared.ReasoningEffort(r.Effort), nil
}

// answerSchema decodes a native answer schema.
func answerSchema(native []byte) (map[string]any, error) {
	var schema map[string]any
	if err := json.Unmarshal(native, &schema); err != nil {
		return nil, &keel.ProviderError{Provider: Name, Kind: keel.ProviderInvalidRequest,
			Message: "output schema is not a JSON object"}
	}
	return schema, nil
}

// toolSchema is the parameter schema of s, an empty object schema when it
// has none.
func toolSchema(s keel.ToolSpec) (map[string]any, error) {
	if len(s.Parameters) == 0 {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var schema map[string]any
	if err := json.Unmarshal(s.Parameters, &schema); err != nil {
		return nil, &keel.ProviderError{Provider: Name, Kind: keel.ProviderInvalidRequest,
			Message: fmt.Sprintf("tool %s: parameters are not a JSON object schema", s.Name)}
	}
	return schema, nil
}

func cmpOr(a, b int) int {
	if a > 0 {
		return a
	}
	return b
}

// messages maps a transcript. An aborted assistant message goes as plain
// text: its tool calls never ran to completion. Tool results whose call was
// not announced by an earlier assistant message (the calls of an aborted
// message) are left out, since the API rejects a result without its call.
// A user message's attachments are content parts after its text; a tool
// message carries text only, so the attachments of a batch of tool
// results go in a user message right after the batch.
func messages(system string, in []keel.Message) ([]oai.ChatCompletionMessageParamUnion, error) {
	out := make([]oai.ChatCompletionMessageParamUnion, 0, len(in)+1)
	if system != "" {
		out = append(out, oai.SystemMessage(system))
	}
	announced := map[string]bool{}
	// attached are the tool results of the current batch that carry
	// attachments, sent in a user message after the batch.
	var attached []int
	flush := func() error {
		if len(attached) == 0 {
			return nil
		}
		u, err := chatToolAttachments(in, attached)
		if err != nil {
			return err
		}
		out, attached = append(out, u), nil
		return nil
	}
	for i, m := range in {
		if m.Role != keel.RoleTool {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		switch m.Role {
		case keel.RoleUser:
			u, err := chatUserMessage(i, m)
			if err != nil {
				return nil, err
			}
			out = append(out, u)
		case keel.RoleAssistant:
			if m.Aborted || len(m.ToolCalls) == 0 {
				if m.Content != "" {
					out = append(out, oai.AssistantMessage(m.Content))
				}
				continue
			}
			a := oai.ChatCompletionAssistantMessageParam{}
			if m.Content != "" {
				a.Content.OfString = param.NewOpt(m.Content)
			}
			for _, c := range m.ToolCalls {
				args := string(c.Arguments)
				if args == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
						ID:       c.ID,
						Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: args},
					},
				})
				announced[c.ID] = true
			}
			out = append(out, oai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case keel.RoleTool:
			if announced[m.ToolCallID] {
				out = append(out, oai.ToolMessage(m.Content, m.ToolCallID))
				if len(m.Attachments) > 0 {
					attached = append(attached, i)
				}
			}
		default:
			return nil, &keel.ProviderError{Provider: Name, Kind: keel.ProviderInvalidRequest,
				Message: fmt.Sprintf("message %d has unknown role %q", i, m.Role)}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// toolParams maps tool specs onto function tools.
func toolParams(specs []keel.ToolSpec) ([]oai.ChatCompletionToolUnionParam, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	out := make([]oai.ChatCompletionToolUnionParam, 0, len(specs))
	for _, s := range specs {
		schema, err := toolSchema(s)
		if err != nil {
			return nil, err
		}
		fn := oai.FunctionDefinitionParam{Name: s.Name, Parameters: schema}
		if s.Description != "" {
			fn.Description = param.NewOpt(s.Description)
		}
		out = append(out, oai.ChatCompletionFunctionTool(fn))
	}
	return out, nil
}
