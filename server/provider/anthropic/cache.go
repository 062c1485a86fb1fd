package anthropic

import (
	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/keelrun/keel/server/provider"
)

// MaxCacheBreakpoints is the most cache_control breakpoints the Messages
// API accepts in one request.
const MaxCacheBreakpoints = 4

// The cache TTLs Config.CacheTTL takes.
const (
	CacheTTL5m = "5m"
	CacheTTL1h = "1h"
)

// markCache puts cache_control breakpoints on the stable prefix of params,
// at most MaxCacheBreakpoints of them. The API caches the prompt in the
// order tools, system, messages, and a breakpoint caches everything up to
// and including its block. The breakpoints go, in prompt order, on:
//
//  1. the last tool definition: the tools, which change least;
//  2. the last system block: tools and system prompt;
//  3. the last block of the message just before the last assistant
//     message: where the previous request of this conversation ended and
//     put its own last breakpoint, so that prefix is read back even when
//     the turn since added more blocks than the API looks back over;
//  4. the last block of the last message: the whole prompt, written for
//     the next request, whose breakpoint 3 lands on this same block.
//
// A breakpoint never goes on a thinking block or an empty one; when the
// block a point names cannot take one, the nearest earlier block that can
// takes it. Two points that land on one block make one breakpoint. A
// compaction request gets none: its prompt is sent once.
func (p *Provider) markCache(params *sdk.MessageNewParams, req provider.Request) {
	if p.cfg.DisableCache || req.Compaction {
		return
	}
	cc := sdk.NewCacheControlEphemeralParam()
	if p.cfg.CacheTTL != "" {
		cc.TTL = sdk.CacheControlEphemeralTTL(p.cfg.CacheTTL)
	}
	n := 0
	set := func(c *sdk.CacheControlEphemeralParam) {
		if c != nil && n < MaxCacheBreakpoints {
			*c = cc
			n++
		}
	}
	if k := len(params.Tools); k > 0 {
		set(params.Tools[k-1].GetCacheControl())
	}
	if k := len(params.System); k > 0 && params.System[k-1].Text != "" {
		set(&params.System[k-1].CacheControl)
	}
	msgs := params.Messages
	if len(msgs) == 0 {
		return
	}
	last := lastCacheable(msgs, len(msgs)-1)
	prev := blockRef{msg: -1}
	for i := len(msgs) - 1; i > 0; i-- {
		if msgs[i].Role == sdk.MessageParamRoleAssistant {
			prev = lastCacheable(msgs, i-1)
			break
		}
	}
	if prev.msg >= 0 && prev != last {
		set(msgs[prev.msg].Content[prev.block].GetCacheControl())
	}
	if last.msg >= 0 {
		set(msgs[last.msg].Content[last.block].GetCacheControl())
	}
}

// blockRef names content block block of message msg; msg -1 names none.
type blockRef struct{ msg, block int }

// lastCacheable is the last block at or before the end of message from
// that can take a breakpoint.
func lastCacheable(msgs []sdk.MessageParam, from int) blockRef {
	for i := from; i >= 0; i-- {
		content := msgs[i].Content
		for j := len(content) - 1; j >= 0; j-- {
			if cacheable(content[j]) {
				return blockRef{i, j}
			}
		}
	}
	return blockRef{msg: -1}
}

// cacheable says whether b can take a breakpoint: not a thinking block
// (the API refuses cache_control there) and not an empty block.
func cacheable(b sdk.ContentBlockParamUnion) bool {
	switch {
	case b.OfThinking != nil, b.OfRedactedThinking != nil:
		return false
	case b.OfText != nil:
		return b.OfText.Text != ""
	case b.OfToolResult != nil:
		return len(b.OfToolResult.Content) > 0
	}
	return b.GetCacheControl() != nil
}
