package keel

// Usage counts tokens and physical provider requests.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	// ReasoningTokens is the part of OutputTokens the provider reported as
	// reasoning; OutputTokens always keeps the provider's full total.
	ReasoningTokens int64 `json:"reasoning_tokens,omitempty"`
	// Requests is the number of physical provider requests counted.
	Requests int `json:"requests"`
}

// Add returns the sum of u and o.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		InputTokens:      u.InputTokens + o.InputTokens,
		OutputTokens:     u.OutputTokens + o.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + o.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + o.CacheWriteTokens,
		ReasoningTokens:  u.ReasoningTokens + o.ReasoningTokens,
		Requests:         u.Requests + o.Requests,
	}
}

// IsZero reports whether u counts nothing.
func (u Usage) IsZero() bool { return u == Usage{} }
