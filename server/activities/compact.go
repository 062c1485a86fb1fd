package activities

import (
	"context"
	"errors"
	"fmt"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
)

// compactSystem is the instruction for a compaction request.
const compactSystem = `You compact conversations between a user and an AI agent. Write a summary that lets the agent ` +
	`continue the work without the original messages: the user's goals and constraints, decisions made, facts learned ` +
	`from tools (file names, values, errors), work done and work still open. Be complete about facts and brief in words.`

// Compact asks the run's model for a summary of the first in.Cut messages
// of the conversation, which the run puts in their place.
func (a *Activities) Compact(ctx context.Context, in CompactInput) (*CompactResult, error) {
	p, model, messages, err := a.prepare(ctx, in.Model, in.Transcript, in.Tail)
	if err != nil {
		return nil, err
	}
	if in.Cut <= 0 || in.Cut > len(messages) {
		return nil, fmt.Errorf("compact: cut %d outside a transcript of %d messages", in.Cut, len(messages))
	}
	ctx, hb := a.begin(ctx)
	defer hb.Stop()
	// A compaction's request is billed like a turn's (docs/contract.md
	// §20); the next turn's budget check counts it.
	price, priced := a.Policy.priceOf(in.Model, p.Name(), model)

	req := provider.Request{
		Model: model, System: compactSystem, Compaction: true, Step: 0, Attempt: 1,
		Messages: append(append([]keel.Message(nil), messages[:in.Cut]...),
			keel.UserMessage("Summarize the conversation above as instructed.")),
	}
	var asm provider.Assembler
	for chunk, err := range p.Stream(ctx, req) {
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, turnError(&TurnFailure{Provider: provider.AsProviderError(p.Name(), err), Usage: a.Policy.bill(asm.Usage(), price, priced)})
		}
		asm.Add(chunk)
	}
	resp, err := asm.Response()
	if err != nil {
		var mal *provider.MalformedError
		if errors.As(err, &mal) {
			return nil, turnError(&TurnFailure{Malformed: mal.Reason, Usage: a.Policy.bill(asm.Usage(), price, priced)})
		}
		return nil, err
	}
	return &CompactResult{Summary: resp.Text, Usage: a.Policy.bill(resp.Usage, price, priced)}, nil
}
