package api

// HandOverLimits bound what a session hands from one execution to the
// next (docs/contract.md, sessions without end). Zero fields take the
// defaults below.
type HandOverLimits struct {
	// TailBytes is how many bytes of durable events the session keeps in
	// memory before it moves them to the content store as a segment.
	// Default DefaultHandOverTailBytes.
	TailBytes int `json:"tail_bytes,omitempty"`
}

// DefaultHandOverTailBytes is the default of HandOverLimits.TailBytes.
const DefaultHandOverTailBytes = 1 << 20

// WithDefaults returns l with its unset fields set to the defaults.
func (l HandOverLimits) WithDefaults() HandOverLimits {
	if l.TailBytes <= 0 {
		l.TailBytes = DefaultHandOverTailBytes
	}
	return l
}

// EventSegment is a run of a session's durable events, First..Last, kept as
// one immutable value in the content store under Key. The session's state
// holds only these references, so its memory and its continue-as-new input
// stay small however long the session lives; readers fetch a segment's
// events through their data converter (docs/contract.md, durable replay).
type EventSegment struct {
	First int64  `json:"first"`
	Last  int64  `json:"last"`
	Key   string `json:"key"`
	// Size is the stored value's size in bytes.
	Size int `json:"size"`
}
