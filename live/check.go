package live

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/keelrun/keel"
)

// Every message a live channel hands a subscriber passed Check, whoever
// published it: on a shared NATS server anyone who may publish to a
// session's subject can send anything, and a subscriber (the gateway's
// event streams, `keel run`) passes what it gets on to people. See
// docs/live.md, "What a subscriber accepts".

// DefaultMaxEventBytes bounds one live event: its JSON envelope, or the
// encrypted payload that carries it. A model's delta is a few tokens and a
// tool's progress note a line, so the bound leaves room for a provider that
// streams a whole tool call's arguments in one delta; a larger event is
// refused by Publish and dropped by subscribers (the durable log still has
// the finished message). NATSOptions.MaxEventBytes changes it.
const DefaultMaxEventBytes = 256 << 10

// Reason says why a live message was refused. Reasons are counted
// (NATS.Rejected, NATSOptions.OnReject, keel_live_rejected_messages_total)
// and never carry the message itself.
type Reason string

// The reasons a live message is refused.
const (
	// ReasonTooLarge: the message is over the size bound.
	ReasonTooLarge Reason = "too_large"
	// ReasonMalformed: the message is not a JSON envelope (or, encrypted,
	// not a payload that holds one).
	ReasonMalformed Reason = "malformed"
	// ReasonSession: the envelope names another session, or an invalid one.
	ReasonSession Reason = "session"
	// ReasonType: the type is not one of keel's ephemeral event types.
	ReasonType Reason = "type"
	// ReasonDurable: the envelope carries a sequence number; durable events
	// never travel on the live channel.
	ReasonDurable Reason = "durable"
	// ReasonRunID: the run ID is not a run of the envelope's session.
	ReasonRunID Reason = "run_id"
	// ReasonData: the data does not decode as the type's event.
	ReasonData Reason = "data"
	// ReasonPlaintext: encryption is on and the message is not encrypted.
	ReasonPlaintext Reason = "plaintext"
	// ReasonEncrypted: the message is encrypted and this subscriber has
	// neither the keys nor a decoder.
	ReasonEncrypted Reason = "encrypted"
	// ReasonDecrypt: the message does not decrypt (altered, or under a key
	// the subscriber does not hold).
	ReasonDecrypt Reason = "decrypt"
	// ReasonCancelNotice: a cancel notice that is not well formed.
	ReasonCancelNotice Reason = "cancel_notice"
)

// RejectError is why a live channel refused an event or a cancel notice.
// It matches keel.ErrInvalidInput with errors.Is. Its message names the
// field at fault, never the message's content beyond keel's own names.
type RejectError struct {
	Reason Reason
	msg    string
}

func (e *RejectError) Error() string { return "live: " + e.msg }

// Is makes a RejectError a keel.ErrInvalidInput.
func (e *RejectError) Is(target error) bool { return target == keel.ErrInvalidInput }

func reject(r Reason, format string, args ...any) *RejectError {
	return &RejectError{Reason: r, msg: fmt.Sprintf(format, args...)}
}

// ephemeralTypes are the event types that travel on the live channel: the
// ephemeral ones of keel's event registry (events.go), which the model-turn
// and tool activities publish. Every other type is durable and comes from
// the session's log only.
var ephemeralTypes = map[string]bool{
	keel.TypeTextDelta:      true,
	keel.TypeReasoningDelta: true,
	keel.TypeToolCallDelta:  true,
	keel.TypeToolProgress:   true,
	keel.TypeModelWaiting:   true,
}

// Check reports whether env may be delivered to a subscriber of
// sessionID: the session is that one, the type one of keel's ephemeral
// types, there is no sequence number (durable events never travel on the
// live channel) and no negative after_seq, the run ID is a run of the
// session (keel.RunID), and the data is a JSON object that decodes as the
// type's event. The error is a *RejectError. Size is the caller's to
// bound: it has the encoded form.
func Check(sessionID string, env keel.Envelope) error {
	if err := checkFields(sessionID, env); err != nil {
		return err
	}
	if _, err := env.Event(); err != nil {
		return reject(ReasonData, "%s event's data does not decode as one", env.Type)
	}
	return nil
}

// checkFields is Check without decoding the data, which it only requires
// to look like a JSON object. NATS's Publish uses it: every subscriber
// decodes the data anyway, and decoding it twice would double what
// publishing costs the run.
func checkFields(sessionID string, env keel.Envelope) error {
	if env.SessionID != sessionID || keel.ValidateSessionID(sessionID) != nil {
		return reject(ReasonSession, "event for another session")
	}
	if !ephemeralTypes[env.Type] {
		return reject(ReasonType, "event type %s is not an ephemeral keel type", quoteName(env.Type))
	}
	if env.Seq != 0 {
		return reject(ReasonDurable, "%s event carries a sequence number: durable events never travel on the live channel", env.Type)
	}
	if env.AfterSeq < 0 {
		return reject(ReasonMalformed, "%s event has a negative after_seq", env.Type)
	}
	if !runOf(sessionID, env.RunID) {
		return reject(ReasonRunID, "%s event names run %s, not a run of session %s", env.Type, quoteName(env.RunID), sessionID)
	}
	if env.Path != "" && !ValidPath(env.Path) {
		return reject(ReasonMalformed, "%s event has a path that is not a child's path", env.Type)
	}
	data := bytes.TrimLeft(env.Data, " \t\r\n")
	if len(data) == 0 || data[0] != '{' {
		return reject(ReasonData, "%s event's data is not a JSON object", env.Type)
	}
	return nil
}

// runOf reports whether runID is keel.RunID(sessionID, n) for some n ≥ 1.
func runOf(sessionID, runID string) bool {
	n, ok := strings.CutPrefix(runID, sessionID+"/run-")
	if !ok || n == "" || len(n) > 18 || n[0] == '0' {
		return false
	}
	for i := range len(n) {
		if n[i] < '0' || n[i] > '9' {
			return false
		}
	}
	return true
}

// quoteName quotes a name from a message for an error, cut short: a
// refused message's fields are the sender's, not keel's.
func quoteName(s string) string {
	const max = 64
	if len(s) > max {
		s = s[:max] + "…"
	}
	return strconv.Quote(s)
}

// compactData removes the whitespace between JSON tokens from data, which
// json.Unmarshal has validated: valid JSON has raw line breaks only there,
// so afterwards none from a sender survives into the envelope a reader
// passes on (an event stream, a log line). Data without any is returned
// as it is.
func compactData(data json.RawMessage) json.RawMessage {
	if bytes.IndexByte(data, '\n') < 0 && bytes.IndexByte(data, '\r') < 0 {
		return data
	}
	var b bytes.Buffer
	if json.Compact(&b, data) != nil {
		return data // unreachable for validated JSON
	}
	return b.Bytes()
}

// decodeEnvelope parses a JSON envelope from the wire and checks it for a
// subscriber of sessionID, with the envelope's data compacted.
func decodeEnvelope(sessionID string, data []byte, maxBytes int) (keel.Envelope, error) {
	if len(data) > maxBytes {
		return keel.Envelope{}, reject(ReasonTooLarge, "event of %d bytes is over the %d-byte bound", len(data), maxBytes)
	}
	var env keel.Envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return keel.Envelope{}, reject(ReasonMalformed, "message is not a JSON envelope")
	}
	if err := Check(sessionID, env); err != nil {
		return keel.Envelope{}, err
	}
	env.Data = compactData(env.Data)
	return env, nil
}

// MaxPathBytes bounds an envelope's path (keel.Envelope.Path): children
// nest a few levels deep (three by default, keel.yaml's delegation_depth).
const MaxPathBytes = 256

// ValidPath reports whether p can be the path of a child session relayed
// to an ancestor (docs/contract.md §21.4): segments of letters, digits,
// '-' and '_' joined by '/', at most MaxPathBytes in all. Renderers show
// it, so nothing else passes.
func ValidPath(p string) bool {
	if p == "" || len(p) > MaxPathBytes {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" {
			return false
		}
		for i := range len(seg) {
			c := seg[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
