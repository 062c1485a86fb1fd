package wiregen

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/gateway"
)

// A Root is one schema of the document: its OpenAPI name and the Go type
// whose JSON it describes.
type Root struct {
	Name string
	Type reflect.Type
}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// Roots are the wire types, in the document's order: the gateway's
// request and response bodies, and the api and keel types it sends as
// they are. A field of one of these types is a $ref to its schema.
var Roots = []Root{
	{"Error", typeOf[gateway.Error]()},
	{"RunRequest", typeOf[gateway.RunRequest]()},
	{"RunResponse", typeOf[gateway.RunResponse]()},
	{"SessionStatus", typeOf[api.SessionStatus]()},
	{"HistoryPage", typeOf[api.HistoryPage]()},
	{"Envelope", typeOf[keel.Envelope]()},
	{"EventsPage", typeOf[gateway.EventsPage]()},
	{"SteerRequest", typeOf[gateway.SteerRequest]()},
	{"SteerResponse", typeOf[gateway.SteerResponse]()},
	{"RetractResponse", typeOf[gateway.RetractResponse]()},
	{"RespondRequest", typeOf[gateway.RespondRequest]()},
	{"ForkRequest", typeOf[gateway.ForkRequest]()},
	{"ForkResponse", typeOf[gateway.ForkResponse]()},
	{"ForksResponse", typeOf[gateway.ForksResponse]()},
	{"RewindRequest", typeOf[gateway.RewindRequest]()},
	{"RewindResponse", typeOf[api.RewindResult]()},
	{"StatusResponse", typeOf[gateway.StatusResponse]()},
	{"HostRequest", typeOf[api.HostRequest]()},
	{"RequestsResponse", typeOf[gateway.RequestsResponse]()},
	{"AGUIRunAgentInput", typeOf[gateway.AGUIInput]()},
	{"SessionsResponse", typeOf[gateway.SessionsResponse]()},
	{"Budget", typeOf[api.Budget]()},
	{"Reasoning", typeOf[keel.Reasoning]()},
	{"Attachment", typeOf[keel.Attachment]()},
	{"ScheduleConfig", typeOf[gateway.ScheduleConfig]()},
	{"Schedule", typeOf[gateway.Schedule]()},
	{"ScheduleChange", typeOf[gateway.ScheduleChange]()},
	{"ScheduleNote", typeOf[gateway.ScheduleNote]()},
	{"ScheduledSendResult", typeOf[api.ScheduledSendResult]()},
	{"ScheduleFiring", typeOf[api.ScheduleFiring]()},
	{"ScheduleStatus", typeOf[gateway.ScheduleStatus]()},
	{"ScheduleSummary", typeOf[api.ScheduleSummary]()},
	{"SchedulesResponse", typeOf[gateway.SchedulesResponse]()},
	{"EvalInput", typeOf[api.EvalInput]()},
	{"EvalStarted", typeOf[gateway.EvalStarted]()},
	{"EvalStatus", typeOf[api.EvalStatus]()},
	{"EvalReport", typeOf[api.EvalReport]()},
	{"KeelError", typeOf[keel.Error]()},
}

// inline types are spelled out where they are used; a field of any
// other struct type is {"type": "object"}, an object the document leaves
// to its own page (docs/contract.md: usage, outcomes, messages, errors'
// provider details, fork origins, delegations).
var inline = map[reflect.Type]bool{
	typeOf[api.RunRef]():             true,
	typeOf[gateway.ForkSummary]():    true,
	typeOf[gateway.SessionSummary](): true,
	typeOf[gateway.AGUIMessage]():    true,
	typeOf[gateway.AGUIResume]():     true,
}

// enums are the string types with a closed set of values, from their Go
// constants; Name is the type's name in the TypeScript and Python
// clients.
var enums = map[reflect.Type]enum{
	typeOf[api.Approval]():      {"Approval", []string{string(api.ApprovalAllow), string(api.ApprovalAsk), string(api.ApprovalDeny)}},
	typeOf[keel.SessionState](): {"SessionState", sessionStates()},
	typeOf[api.Retraction]():    {"", []string{string(api.Retracted), string(api.AlreadyApplied), string(api.NotFound)}},
	typeOf[api.Overlap]():       {"", []string{string(api.OverlapSkip), string(api.OverlapQueue), string(api.OverlapSteer)}},
	typeOf[keel.ReasoningEffort](): {"", []string{string(keel.ReasoningMinimal), string(keel.ReasoningLow),
		string(keel.ReasoningMedium), string(keel.ReasoningHigh)}},
	typeOf[keel.AttachmentKind](): {"", []string{string(keel.AttachmentImage), string(keel.AttachmentDocument)}},
}

// tsNames are the TypeScript client's own declarations of types the
// document leaves as objects.
var tsNames = map[reflect.Type]string{typeOf[keel.Usage](): "Usage"}

type enum struct {
	Name   string
	Values []string
}

func sessionStates() []string {
	var out []string
	for _, s := range []keel.SessionState{keel.StateIdle, keel.StateRunning, keel.StateWaitingForHostInput,
		keel.StateCancelling, keel.StateCompleted, keel.StateFailed, keel.StateTerminated} {
		out = append(out, string(s))
	}
	return out
}

var (
	timeType     = typeOf[time.Time]()
	durationType = typeOf[keel.Duration]()
	rawType      = typeOf[json.RawMessage]()
)

// Schema is an OpenAPI schema object. Keys keep the order they are set
// in: properties in the Go type's field order, then annotations.
type Schema = *Ordered

// schemas builds components.schemas from Roots, without annotations.
func schemas() (*Ordered, error) {
	clientNames = map[*Ordered]string{}
	names := map[reflect.Type]string{}
	for _, r := range Roots {
		names[r.Type] = r.Name
	}
	out := NewOrdered()
	for _, r := range Roots {
		s, err := structSchema(r.Type, names, r.Name)
		if err != nil {
			return nil, err
		}
		out.Set(r.Name, s)
	}
	return out, nil
}

type field struct {
	name     string
	t        reflect.Type
	required bool
}

// jsonFields lists a struct's fields as encoding/json writes them,
// embedded structs' fields in place.
func jsonFields(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		omit := false
		for _, o := range strings.Split(opts, ",") {
			if o == "omitempty" || o == "omitzero" {
				omit = true
			}
		}
		out = append(out, field{name: name, t: f.Type, required: !omit})
	}
	return out
}

func structSchema(t reflect.Type, names map[reflect.Type]string, where string) (Schema, error) {
	s := NewOrdered()
	s.Set("type", "object")
	var required []string
	props := NewOrdered()
	for _, f := range jsonFields(t) {
		p, err := typeSchema(f.t, names, where+"."+f.name)
		if err != nil {
			return nil, err
		}
		props.Set(f.name, p)
		if f.required {
			required = append(required, f.name)
		}
	}
	if len(required) > 0 {
		s.Set("required", required)
	}
	s.Set("properties", props)
	return s, nil
}

func typeSchema(t reflect.Type, names map[reflect.Type]string, where string) (Schema, error) {
	s := NewOrdered()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n, ok := names[t]; ok {
		s.Set("$ref", "#/components/schemas/"+n)
		return s, nil
	}
	if e, ok := enums[t]; ok {
		s.Set("enum", e.Values)
		if e.Name != "" {
			clientNames[s] = e.Name
		}
		return s, nil
	}
	if n, ok := tsNames[t]; ok {
		clientNames[s] = n
	}
	switch {
	case t == timeType:
		s.Set("type", "string")
		s.Set("format", "date-time")
		return s, nil
	case t == durationType:
		s.Set("type", "string")
		return s, nil
	case t == rawType:
		return s, nil
	}
	switch t.Kind() {
	case reflect.String:
		s.Set("type", "string")
	case reflect.Bool:
		s.Set("type", "boolean")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		s.Set("type", "integer")
	case reflect.Float32, reflect.Float64:
		s.Set("type", "number")
	case reflect.Slice, reflect.Array:
		items, err := typeSchema(t.Elem(), names, where+"[]")
		if err != nil {
			return nil, err
		}
		s.Set("type", "array")
		s.Set("items", items)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: map key %s is not a string", where, t.Key())
		}
		v, err := typeSchema(t.Elem(), names, where+"{}")
		if err != nil {
			return nil, err
		}
		s.Set("type", "object")
		s.Set("additionalProperties", v)
	case reflect.Struct:
		if inline[t] {
			s, err := structSchema(t, names, where)
			if err == nil {
				clientNames[s] = t.Name()
			}
			return s, err
		}
		s.Set("type", "object")
	default:
		return nil, fmt.Errorf("%s: no schema for %s", where, t)
	}
	return s, nil
}
