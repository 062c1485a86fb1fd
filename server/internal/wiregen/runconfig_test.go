package wiregen_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/gateway"
)

func jsonNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// TestRunConfigCopiesAgree: the gateway's copies of api.RunConfig carry
// each of its fields but those their doc comments leave out, and no
// field RunConfig lacks other than their own request fields.
func TestRunConfigCopiesAgree(t *testing.T) {
	operator := []string{"model_timeout", "heartbeat_timeout", "compact_at"}
	for _, c := range []struct {
		typ     reflect.Type
		without []string // RunConfig's fields it leaves out (its doc says why)
		own     []string // its fields that are not RunConfig's
	}{
		{reflect.TypeFor[gateway.RunRequest](), operator, []string{"prompt", "attachments", "if_active", "set_default", "once"}},
		{reflect.TypeFor[gateway.ScheduleConfig](), operator, nil},
	} {
		have := jsonNames(c.typ)
		for _, f := range jsonNames(reflect.TypeFor[api.RunConfig]()) {
			if !slices.Contains(have, f) && !slices.Contains(c.without, f) {
				t.Errorf("%s lacks api.RunConfig's %s", c.typ, f)
			}
			if slices.Contains(have, f) && slices.Contains(c.without, f) {
				t.Errorf("%s has %s, which it is said to leave out", c.typ, f)
			}
		}
		cfg := jsonNames(reflect.TypeFor[api.RunConfig]())
		for _, f := range have {
			if !slices.Contains(cfg, f) && !slices.Contains(c.own, f) {
				t.Errorf("%s has %s, which api.RunConfig lacks", c.typ, f)
			}
		}
	}
}
