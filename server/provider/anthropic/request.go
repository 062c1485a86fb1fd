package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
)

// params maps a keel request onto Messages parameters.
func (p *Provider) params(req provider.Request) (sdk.MessageNewParams, error) {
	if req.Model == "" {
		return sdk.MessageNewParams{}, &keel.ProviderError{Provider: Name,
			Kind: keel.ProviderUnknownModel, Message: "no model given (use anthropic:MODEL)"}
	}
	reasoning := req.Reasoning
	if reasoning.IsZero() {
		reasoning = p.cfg.Reasoning
	}
	budget, err := thinkingBudget(req.Model, reasoning)
	if err != nil {
		return sdk.MessageNewParams{}, &keel.ProviderError{Provider: Name, Kind: keel.ProviderInvalidRequest, Message: err.Error()}
	}
	msgs, err := messages(req.Messages, budget > 0)
	if err != nil {
		return sdk.MessageNewParams{}, err
	}
	tools, err := toolParams(req.Tools)
	if err != nil {
		return sdk.MessageNewParams{}, err
	}
	system := req.System
	native := provider.AnswerSchema(req.OutputSchema)
	if budget > 0 {
		// With thinking on the API lets the model choose its tools
		// (tool_choice auto) and no more, so the answer tool cannot be
		// forced: the schema is asked for in the instructions.
		native = nil
	}
	if native == nil {
		system = provider.WithInstruction(system, req.OutputSchema)
	}
	params := sdk.MessageNewParams{
		Model:     req.Model,
		MaxTokens: int64(p.cfg.MaxTokens),
		Messages:  msgs,
		Tools:     tools,
	}
	if native != nil {
		// The Messages API has no structured-output mode here: the answer
		// is the input of a tool the model must call (docs/contract.md
		// §21.1). With tools of its own the model must call one of them
		// or the answer tool; without, the answer tool.
		t := sdk.ToolParam{Name: provider.AnswerTool, Description: param.NewOpt(provider.AnswerToolDescription),
			InputSchema: param.Override[sdk.ToolInputSchemaParam](native)}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: &t})
		params.ToolChoice = sdk.ToolChoiceUnionParam{OfAny: &sdk.ToolChoiceAnyParam{}}
		if len(tools) == 0 {
			params.ToolChoice = sdk.ToolChoiceParamOfTool(provider.AnswerTool)
		}
	}
	if req.MaxTokens > 0 {
		params.MaxTokens = int64(req.MaxTokens)
	}
	params.Tools = append(params.Tools, p.hosted...)
	if budget > 0 {
		// max_tokens counts the thinking too: the cap is the budget plus
		// what the answer may take.
		params.Thinking = sdk.ThinkingConfigParamOfEnabled(int64(budget))
		params.MaxTokens += int64(budget)
	}
	if system != "" {
		params.System = []sdk.TextBlockParam{{Text: system}}
	}
	p.markCache(&params, req)
	return params, nil
}

// messages maps a transcript. Consecutive messages of one role become one
// message (the tool results of a batch, and steering that follows them, form
// a single user turn with the results first, as the API requires). An
// aborted assistant message goes as plain text; tool results whose call was
// not announced by an earlier assistant message are left out, since the API
// rejects a result without its call. Empty text is left out too: the API
// rejects empty text blocks. Thinking goes back only to a request that
// thinks. Attachments follow their message's text, as image and document
// blocks of a user turn or inside a tool result.
func messages(in []keel.Message, thinking bool) ([]sdk.MessageParam, error) {
	var out []sdk.MessageParam
	add := func(role sdk.MessageParamRole, blocks ...sdk.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, sdk.MessageParam{Role: role, Content: blocks})
	}
	announced := map[string]bool{}
	for i, m := range in {
		switch m.Role {
		case keel.RoleUser:
			var blocks []sdk.ContentBlockParamUnion
			if m.Content != "" {
				blocks = append(blocks, sdk.NewTextBlock(m.Content))
			}
			for j, a := range m.Attachments {
				b, err := attachmentBlock(i, j, a)
				if err != nil {
					return nil, err
				}
				blocks = append(blocks, b)
			}
			add(sdk.MessageParamRoleUser, blocks...)
		case keel.RoleAssistant:
			var blocks []sdk.ContentBlockParamUnion
			if thinking && !m.Aborted {
				// Thinking goes back first and unchanged, as the API
				// requires of the turn that called the tools.
				for _, r := range m.Reasoning {
					switch {
					case r.Provider != Name:
					case r.Redacted:
						blocks = append(blocks, sdk.NewRedactedThinkingBlock(r.Signature))
					default:
						blocks = append(blocks, sdk.NewThinkingBlock(r.Signature, r.Text))
					}
				}
			}
			if m.Content != "" {
				blocks = append(blocks, sdk.NewTextBlock(m.Content))
			}
			if !m.Aborted {
				for _, c := range m.ToolCalls {
					args := bytes.TrimSpace(c.Arguments)
					if len(args) == 0 {
						args = []byte("{}")
					}
					if !json.Valid(args) {
						return nil, &keel.ProviderError{Provider: Name, Kind: keel.ProviderInvalidRequest,
							Message: fmt.Sprintf("message %d: tool call %s has arguments that are not JSON", i, c.ID)}
					}
					blocks = append(blocks, sdk.NewToolUseBlock(c.ID, json.RawMessage(args), c.Name))
					announced[c.ID] = true
				}
			}
			add(sdk.MessageParamRoleAssistant, blocks...)
		case keel.RoleTool:
			if !announced[m.ToolCallID] {
				continue
			}
			r := sdk.ToolResultBlockParam{ToolUseID: m.ToolCallID}
			if m.Content != "" {
				r.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: m.Content}}}
			}
			for j, a := range m.Attachments {
				b, err := attachmentBlock(i, j, a)
				if err != nil {
					return nil, err
				}
				r.Content = append(r.Content, sdk.ToolResultBlockParamContentUnion{OfImage: b.OfImage, OfDocument: b.OfDocument})
			}
			if m.ToolStatus != "" && m.ToolStatus != keel.ToolOK {
				r.IsError = param.NewOpt(true)
			}
			add(sdk.MessageParamRoleUser, sdk.ContentBlockParamUnion{OfToolResult: &r})
		default:
			return nil, &keel.ProviderError{Provider: Name, Kind: keel.ProviderInvalidRequest,
				Message: fmt.Sprintf("message %d has unknown role %q", i, m.Role)}
		}
	}
	return out, nil
}

// toolParams maps tool specs; each spec's JSON Schema is sent as it is.
func toolParams(specs []keel.ToolSpec) ([]sdk.ToolUnionParam, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	out := make([]sdk.ToolUnionParam, 0, len(specs))
	for _, s := range specs {
		schema := json.RawMessage(`{"type":"object","properties":{}}`)
		if len(s.Parameters) > 0 {
			var probe map[string]json.RawMessage
			if json.Unmarshal(s.Parameters, &probe) != nil {
				return nil, &keel.ProviderError{Provider: Name, Kind: keel.ProviderInvalidRequest,
					Message: fmt.Sprintf("tool %s: parameters are not a JSON object schema", s.Name)}
			}
			schema = s.Parameters
		}
		t := sdk.ToolParam{Name: s.Name, InputSchema: param.Override[sdk.ToolInputSchemaParam](schema)}
		if s.Description != "" {
			t.Description = param.NewOpt(s.Description)
		}
		out = append(out, sdk.ToolUnionParam{OfTool: &t})
	}
	return out, nil
}

// The thinking budget each effort stands for. The largest leaves room for
// an answer under the 32,000 output tokens of the smallest current cap.
var effortBudget = map[keel.ReasoningEffort]int{
	keel.ReasoningMinimal: keel.MinReasoningBudget,
	keel.ReasoningLow:     4096,
	keel.ReasoningMedium:  12288,
	keel.ReasoningHigh:    24576,
}

// noThinking are the model families that cannot think.
var noThinking = []string{"claude-3-5-", "claude-3-haiku", "claude-3-opus", "claude-3-sonnet", "claude-2", "claude-instant"}

// thinkingBudget is the extended thinking budget r asks of model: zero for
// none; an error when model cannot think.
func thinkingBudget(model string, r keel.Reasoning) (int, error) {
	if r.IsZero() {
		return 0, nil
	}
	if err := r.Validate(); err != nil {
		return 0, err
	}
	for _, f := range noThinking {
		if strings.HasPrefix(model, f) {
			return 0, fmt.Errorf("reasoning: %.64s has no extended thinking", model)
		}
	}
	if r.BudgetTokens > 0 {
		return r.BudgetTokens, nil
	}
	return effortBudget[r.Effort], nil
}

// CheckReasoning implements provider.ReasoningChecker: every setting maps
// to a thinking budget, on a model that can think.
func (p *Provider) CheckReasoning(model string, r keel.Reasoning) error {
	if _, err := thinkingBudget(model, r); err != nil {
		return keel.Errorf(keel.CodeInvalidInput, "%s", err.Error())
	}
	return nil
}
