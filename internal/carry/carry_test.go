package carry_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
)

// A client's input (api.SessionInput) and the workflow's own
// (carry.SessionInput) share their fields, in the same order with the same
// tags, so a client's input encodes to the same bytes whichever type holds
// it, and the inputs of recorded histories read back the same.
func TestSessionInputMirrorsAPI(t *testing.T) {
	pub, own := reflect.TypeFor[api.SessionInput](), reflect.TypeFor[carry.SessionInput]()
	j := 0
	for i := range pub.NumField() {
		f := pub.Field(i)
		for j < own.NumField() && own.Field(j).Name != f.Name {
			j++
		}
		if j == own.NumField() {
			t.Fatalf("api.SessionInput.%s is not in carry.SessionInput, or not in the same order", f.Name)
		}
		if g := own.Field(j); g.Type != f.Type || g.Tag != f.Tag {
			t.Errorf("field %s: %v %q in carry, %v %q in api", f.Name, g.Type, g.Tag, f.Type, f.Tag)
		}
	}
	in := api.SessionInput{SessionID: "s1", Config: api.RunConfig{Model: "scripted:demo", Tools: []string{"read_file"}},
		HandOver: api.HandOverLimits{TailBytes: 4096},
		Fork:     &api.ForkInput{Origin: api.ForkOrigin{Source: "s0", Point: api.Point{Run: 2}}}}
	a, _ := json.Marshal(in)
	b, _ := json.Marshal(carry.SessionInput{SessionID: in.SessionID, Config: in.Config, HandOver: in.HandOver, Fork: in.Fork})
	if !bytes.Equal(a, b) {
		t.Fatalf("api: %s\ncarry: %s", a, b)
	}
}
