package keel

// EstimateTokens is a provider-neutral estimate of the tokens a request
// takes: about four bytes a token for text and tool arguments, plus a few
// tokens of framing per message. It is for display and thresholds only;
// providers report the real count in usage.
func EstimateTokens(system string, messages []Message) int {
	n := bytesToTokens(len(system))
	for _, m := range messages {
		n += 4 + bytesToTokens(len(m.Content))
		for _, c := range m.ToolCalls {
			n += 4 + bytesToTokens(len(c.Name)+len(c.Arguments))
		}
	}
	return n
}

// EstimateToolTokens estimates the tokens that tool specs take in a
// request, by the same measure: their name, description and schema, plus
// a few tokens of framing each.
func EstimateToolTokens(specs []ToolSpec) int {
	n := 0
	for _, sp := range specs {
		n += 8 + bytesToTokens(len(sp.Name)+len(sp.Description)+len(sp.Parameters))
	}
	return n
}

func bytesToTokens(b int) int { return (b + 3) / 4 }
