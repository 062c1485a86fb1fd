package openai

import (
	"fmt"
	"slices"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
)

// hostedTools builds the hosted tools names enables, refusing unknown names
// and a file search without vector stores.
func hostedTools(names, vectorStores []string) ([]responses.ToolUnionParam, error) {
	var out []responses.ToolUnionParam
	var seen []string
	for _, name := range names {
		if slices.Contains(seen, name) {
			continue
		}
		seen = append(seen, name)
		switch name {
		case HostedWebSearch:
			out = append(out, responses.ToolParamOfWebSearch(responses.WebSearchToolTypeWebSearch))
		case HostedFileSearch:
			if len(vectorStores) == 0 {
				return nil, ErrNoVectorStores
			}
			out = append(out, responses.ToolParamOfFileSearch(slices.Clone(vectorStores)))
		case HostedCodeInterpreter:
			out = append(out, responses.ToolParamOfCodeInterpreter(
				responses.ToolCodeInterpreterContainerCodeInterpreterContainerAutoParam{}))
		default:
			return nil, fmt.Errorf("%w, not %q", ErrBadHostedTool, clip(name, 64))
		}
	}
	return out, nil
}

// responseParams maps a keel request onto Responses API parameters. keel
// keeps the transcript: nothing is stored on the server (store: false, no
// previous_response_id), and each request sends the whole conversation
// with the encrypted reasoning of earlier turns.
func (p *Provider) responseParams(req provider.Request) (responses.ResponseNewParams, error) {
	if req.Model == "" {
		return responses.ResponseNewParams{}, &keel.ProviderError{Provider: Name,
			Kind: keel.ProviderUnknownModel, Message: "no model given (use openai:MODEL)"}
	}
	effort, err := reasoningEffort(p.reasoning(req))
	if err != nil {
		return responses.ResponseNewParams{}, err
	}
	native := provider.AnswerSchema(req.OutputSchema)
	system := req.System
	if native == nil {
		system = provider.WithInstruction(system, req.OutputSchema)
	}
	input, err := inputItems(req.Messages)
	if err != nil {
		return responses.ResponseNewParams{}, err
	}
	tools := slices.Clip(p.hosted)
	for _, s := range req.Tools {
		schema, err := toolSchema(s)
		if err != nil {
			return responses.ResponseNewParams{}, err
		}
		fn := responses.ToolParamOfFunction(s.Name, schema, false)
		if s.Description != "" {
			fn.OfFunction.Description = param.NewOpt(s.Description)
		}
		tools = append(tools, fn)
	}
	params := responses.ResponseNewParams{
		Model: req.Model,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		Tools: tools,
		Store: param.NewOpt(false),
	}
	if system != "" {
		params.Instructions = param.NewOpt(system)
	}
	if limit := cmpOr(req.MaxTokens, p.cfg.MaxTokens); limit > 0 {
		params.MaxOutputTokens = param.NewOpt(int64(limit))
	}
	if effort != "" {
		params.Reasoning = shared.ReasoningParam{Effort: effort, Summary: shared.ReasoningSummaryAuto}
	}
	// Without the encrypted reasoning, a reasoning item cannot be sent
	// back: the server keeps nothing to look its ID up in.
	if effort != "" || slices.ContainsFunc(req.Messages, hasOwnReasoning) {
		params.Include = append(params.Include, responses.ResponseIncludableReasoningEncryptedContent)
	}
	if p.sources {
		params.Include = append(params.Include, responses.ResponseIncludableWebSearchCallActionSources)
	}
	if native != nil {
		schema, err := answerSchema(native)
		if err != nil {
			return responses.ResponseNewParams{}, err
		}
		// Not strict, as on Chat Completions.
		params.Text.Format.OfJSONSchema = &responses.ResponseFormatTextJSONSchemaConfigParam{
			Name: "answer", Schema: schema, Strict: param.NewOpt(false)}
	}
	if p.cacheKey {
		params.PromptCacheKey = param.NewOpt(cacheKey(req))
	}
	return params, nil
}

// hasOwnReasoning reports whether m holds reasoning this provider wrote.
func hasOwnReasoning(m keel.Message) bool {
	return slices.ContainsFunc(m.Reasoning, func(r keel.ReasoningPart) bool { return r.Provider == Name })
}

// inputItems maps a transcript onto input items. An assistant message
// sends its OpenAI reasoning items first (with their encrypted content;
// those without it, or written by another provider, are left out), then
// its text, then its function calls. An aborted message goes as plain
// text, and tool results without an announced call are left out, as on
// Chat Completions. Attachments go in their message: a user message's
// after its text, a tool result's in its output.
func inputItems(in []keel.Message) (responses.ResponseInputParam, error) {
	out := make(responses.ResponseInputParam, 0, len(in))
	announced := map[string]bool{}
	for i, m := range in {
		switch m.Role {
		case keel.RoleUser:
			item, err := responsesUserMessage(i, m)
			if err != nil {
				return nil, err
			}
			out = append(out, item)
		case keel.RoleAssistant:
			if !m.Aborted {
				out = appendReasoning(out, m.Reasoning)
			}
			if m.Content != "" {
				out = append(out, responses.ResponseInputItemParamOfMessage(m.Content, responses.EasyInputMessageRoleAssistant))
			}
			if m.Aborted {
				continue
			}
			for _, c := range m.ToolCalls {
				args := string(c.Arguments)
				if args == "" {
					args = "{}"
				}
				out = append(out, responses.ResponseInputItemParamOfFunctionCall(args, c.ID, c.Name))
				announced[c.ID] = true
			}
		case keel.RoleTool:
			if announced[m.ToolCallID] {
				item, err := responsesToolOutput(i, m)
				if err != nil {
					return nil, err
				}
				item.OfFunctionCallOutput.CallID = param.NewOpt(m.ToolCallID)
				out = append(out, item)
			}
		default:
			return nil, &keel.ProviderError{Provider: Name, Kind: keel.ProviderInvalidRequest,
				Message: fmt.Sprintf("message %d has unknown role %q", i, m.Role)}
		}
	}
	return out, nil
}

// appendReasoning appends the reasoning items of parts that this provider
// wrote with their encrypted content. The summary goes back as one part.
func appendReasoning(out responses.ResponseInputParam, parts []keel.ReasoningPart) responses.ResponseInputParam {
	for _, r := range parts {
		if r.Provider != Name || r.ID == "" || r.Signature == "" {
			continue
		}
		item := responses.ResponseReasoningItemParam{ID: r.ID, EncryptedContent: param.NewOpt(r.Signature),
			Summary: []responses.ResponseReasoningItemSummaryParam{}}
		if r.Text != "" {
			item.Summary = append(item.Summary, responses.ResponseReasoningItemSummaryParam{Text: r.Text})
		}
		out = append(out, responses.ResponseInputItemUnionParam{OfReasoning: &item})
	}
	return out
}
