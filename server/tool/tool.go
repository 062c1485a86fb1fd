package tool

import (
	"context"
	"encoding/json"
	"time"

	"github.com/keelrun/keel"
)

// Tool is something a model can call.
type Tool interface {
	// Spec describes the tool to the model.
	Spec() keel.ToolSpec
	// Call runs the tool. A returned error becomes an error result the model
	// sees (status "error"); it does not fail the run. Call must stop when
	// ctx is cancelled.
	Call(ctx context.Context, args json.RawMessage) (Result, error)
}

// Result is what a call returns to the model.
type Result struct {
	Output string `json:"output"`
	// IsError marks an output that reports a failure to the model.
	IsError bool `json:"is_error,omitempty"`
	// Files are images and PDFs the result shows the model: the worker
	// stores each in the content store and the tool message carries its
	// reference (keel.Attachment). Those keel does not take, or past
	// keel.MaxAttachments, are left out with a note in the output.
	// Optional.
	Files []File `json:"-"`
}

// File is an image or a document a tool returns.
type File struct {
	Name      string
	MediaType string
	Data      []byte
}

// Detacher is implemented by tools that run detached: the run goes on while
// the call runs, and its result enters history when it completes.
type Detacher interface {
	Detached() bool
}

// Timeouter is implemented by tools that need a start-to-close timeout other
// than DefaultTimeout.
type Timeouter interface {
	Timeout() time.Duration
}

// Native is implemented by the tools a run's workflow code performs itself
// instead of in an activity (a durable timer, a question to the host).
// NativeKind returns which.
type Native interface {
	NativeKind() string
}

// The native kinds.
const (
	NativeSleep   = "sleep"
	NativeAskUser = "ask_user"
)

// DefaultTimeout is the start-to-close timeout of a tool call.
const DefaultTimeout = 10 * time.Minute

// Traits are the execution traits of a tool, read from its optional
// interfaces.
type Traits struct {
	Detached bool          `json:"detached,omitempty"`
	Timeout  keel.Duration `json:"timeout,omitempty"`
	Native   string        `json:"native,omitempty"`
}

// TraitsOf returns t's traits.
func TraitsOf(t Tool) Traits {
	tr := Traits{Timeout: keel.Duration(DefaultTimeout)}
	if d, ok := t.(Detacher); ok {
		tr.Detached = d.Detached()
	}
	if to, ok := t.(Timeouter); ok && to.Timeout() > 0 {
		tr.Timeout = keel.Duration(to.Timeout())
	}
	if n, ok := t.(Native); ok {
		tr.Native = n.NativeKind()
	}
	return tr
}
