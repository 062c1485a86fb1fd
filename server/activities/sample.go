package activities

import (
	"context"
	"sync"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/tool"
)

// sample asks the run's model (spec) for one response on behalf of a tool
// call (tool.Sample). It returns the request's usage even when the
// request failed: an abandoned request is billed all the same. A sampling
// request is a model request like a turn, whoever asks for it (an MCP
// server): it takes a slot of its provider's concurrency (waiting for one
// while the Tool activity heartbeats) and the worker's token cap.
func (a *Activities) sample(ctx context.Context, spec string, req tool.SampleRequest) (tool.SampleResult, keel.Usage, error) {
	p, model, err := a.Models.Resolve(spec)
	if err != nil {
		return tool.SampleResult{}, keel.Usage{}, err
	}
	release, err := a.slots.acquire(ctx, &a.Policy, p.Name())
	if err != nil {
		return tool.SampleResult{}, keel.Usage{}, err
	}
	defer release()
	price, priced := a.Policy.priceOf(spec, p.Name(), model)
	preq := provider.Request{Model: model, System: req.System, Messages: req.Messages,
		MaxTokens: a.Policy.capTokens(req.MaxTokens), Step: 0, Attempt: 1}
	var asm provider.Assembler
	for chunk, err := range p.Stream(ctx, preq) {
		if err != nil {
			return tool.SampleResult{}, a.Policy.bill(asm.Usage(), price, priced), provider.AsProviderError(p.Name(), err)
		}
		asm.Add(chunk)
	}
	resp, err := asm.Response()
	if err != nil {
		return tool.SampleResult{}, a.Policy.bill(asm.Usage(), price, priced), err
	}
	return tool.SampleResult{Text: resp.Text, Model: model, Finish: string(resp.Finish)}, a.Policy.bill(resp.Usage, price, priced), nil
}

// samplingLog collects the usage of a call's sampling requests.
type samplingLog struct {
	mu    sync.Mutex
	usage []keel.Usage
}

func (l *samplingLog) add(u keel.Usage) {
	if u.Requests == 0 {
		return // no request was made
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.usage = append(l.usage, u)
}

func (l *samplingLog) all() []keel.Usage {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]keel.Usage(nil), l.usage...)
}
