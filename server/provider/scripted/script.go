package scripted

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/keelrun/keel"
)

// Script is a scripted conversation: the model's side of each turn, in order.
type Script struct {
	// Name is reported as the model name.
	Name string `json:"name,omitempty"`
	// ChunkDelay is the pause before each chunk, to make streaming visible.
	// Optional; default none.
	ChunkDelay keel.Duration `json:"chunk_delay,omitempty"`
	// Repeat plays the turns again from the first once they are used up,
	// so one script can serve run after run of a session.
	Repeat bool   `json:"repeat,omitempty"`
	Turns  []Turn `json:"turns"`
}

// Turn is one model turn: what a successful attempt streams, and failures
// injected into the first attempts.
type Turn struct {
	// Failures[i] is what attempt i+1 does instead of succeeding.
	Failures []Failure `json:"failures,omitempty"`
	// Reasoning streams as reasoning; a request that asks for reasoning
	// also gets it back whole, as a part its later requests carry.
	Reasoning []string `json:"reasoning,omitempty"`
	// Hosted are uses of hosted tools the turn reports.
	Hosted    []keel.HostedToolActivity `json:"hosted,omitempty"`
	Text      []string                  `json:"text,omitempty"`
	ToolCalls []ScriptedCall            `json:"tool_calls,omitempty"`
	Usage     *keel.Usage               `json:"usage,omitempty"`
	Finish    string                    `json:"finish,omitempty"`
	// Generation is reported as the generation-window output token count.
	Generation *keel.GenerationTokens `json:"generation,omitempty"`
	// ChunkDelay overrides the script's delay for this turn.
	ChunkDelay *keel.Duration `json:"chunk_delay,omitempty"`
}

// ScriptedCall is a tool call the scripted model makes.
type ScriptedCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Failure is an injected failure. Kind is a keel.ProviderErrorKind
// ("rate_limited", "overloaded", "server_error", "invalid_request", "auth",
// ...) or one of the stream faults: "malformed" (a tool call whose
// arguments are not JSON), "empty" (a response with nothing in it),
// "no_finish" (a stream that ends without a finish reason), "stream_cut"
// (the connection drops after AfterChunks chunks) and "hang" (the request
// never answers until cancelled); and "text", an attempt that answers Text
// instead of the turn's text and tool calls: a complete response keel may
// still refuse, such as an answer that does not match the run's output
// schema (docs/contract.md §21.1).
type Failure struct {
	Kind       string        `json:"kind"`
	Status     int           `json:"status,omitempty"`
	RetryAfter keel.Duration `json:"retry_after,omitempty"`
	Message    string        `json:"message,omitempty"`
	// AfterChunks is how many chunks of the turn stream before a
	// stream_cut, hang or malformed failure strikes.
	AfterChunks int `json:"after_chunks,omitempty"`
	// Usage is reported by the failed attempt (billable all the same).
	Usage *keel.Usage `json:"usage,omitempty"`
	// Text is what a "text" attempt streams, in chunks.
	Text []string `json:"text,omitempty"`
}

// The stream-fault kinds of Failure.
const (
	FaultMalformed = "malformed"
	FaultEmpty     = "empty"
	FaultNoFinish  = "no_finish"
	FaultStreamCut = "stream_cut"
	FaultHang      = "hang"
	FaultText      = "text"
)

// Parse reads a script from JSON and checks it.
func Parse(data []byte) (*Script, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("scripted: parse script: %w", err)
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Load reads the script file at path, a path the worker's operator gave
// (keel.yaml's scripted models); a client never names one. The file must be
// a regular file of at most MaxScriptBytes: a FIFO or a device is refused
// without blocking (ErrNotRegular), a larger file with ErrTooLarge.
func Load(path string) (*Script, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openNonBlock, 0)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	defer f.Close()
	_, s, err := readScript(f, path)
	return s, err
}

func (s *Script) check() error {
	if len(s.Turns) == 0 {
		return fmt.Errorf("scripted: script has no turns")
	}
	for i, t := range s.Turns {
		for j, c := range t.ToolCalls {
			if c.Name == "" {
				return fmt.Errorf("scripted: turn %d, tool call %d has no name", i+1, j+1)
			}
			if len(c.Arguments) > 0 && !json.Valid(c.Arguments) {
				return fmt.Errorf("scripted: turn %d, tool call %d: arguments are not JSON", i+1, j+1)
			}
		}
		for j, f := range t.Failures {
			switch f.Kind {
			case FaultMalformed, FaultEmpty, FaultNoFinish, FaultStreamCut, FaultHang:
			case FaultText:
				if len(f.Text) == 0 {
					return fmt.Errorf("scripted: turn %d, failure %d of kind %q has no text", i+1, j+1, f.Kind)
				}
			default:
				if !knownKind(keel.ProviderErrorKind(f.Kind)) {
					return fmt.Errorf("scripted: turn %d, failure %d has unknown kind %q", i+1, j+1, f.Kind)
				}
			}
		}
		if len(t.Text) == 0 && len(t.ToolCalls) == 0 {
			return fmt.Errorf("scripted: turn %d has neither text nor tool calls", i+1)
		}
	}
	return nil
}

func knownKind(k keel.ProviderErrorKind) bool {
	switch k {
	case keel.ProviderRateLimited, keel.ProviderOverloaded, keel.ProviderServer, keel.ProviderTimeout,
		keel.ProviderConflict, keel.ProviderConnection, keel.ProviderStreamCut, keel.ProviderAuth,
		keel.ProviderInvalidRequest, keel.ProviderUnknownModel:
		return true
	}
	return false
}
