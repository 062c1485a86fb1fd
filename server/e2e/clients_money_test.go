package e2e_test

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/keelrun/keel"
)

// jsonFields returns the JSON names of the fields of the struct v.
func jsonFields(v any) []string {
	var out []string
	t := reflect.TypeOf(v)
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// pythonClassFields returns the fields of class name in a Python module's
// source: the annotated names of its body, up to the next blank line
// followed by something not indented.
func pythonClassFields(src, name string) ([]string, bool) {
	start := regexp.MustCompile(`(?m)^class ` + name + `\(TypedDict.*\):$`).FindStringIndex(src)
	if start == nil {
		return nil, false
	}
	var out []string
	field := regexp.MustCompile(`^    ([a-z_][a-z0-9_]*): `)
	for _, line := range strings.Split(src[start[1]:], "\n")[1:] {
		if line != "" && !strings.HasPrefix(line, " ") {
			break
		}
		if m := field.FindStringSubmatch(line); m != nil {
			out = append(out, m[1])
		}
	}
	return out, true
}

// The clients' types of money (docs/contract.md §20) have exactly the
// fields keel puts on the wire: Usage and Cost in the TypeScript client's
// index.d.ts and the Python client's types.py, and the data of a
// budget.warning event in both.
func TestClientsDeclareMoney(t *testing.T) {
	want := map[string][]string{
		"Usage":         jsonFields(keel.Usage{}),
		"Cost":          jsonFields(keel.Cost{}),
		"BudgetWarning": jsonFields(keel.BudgetWarning{}),
	}
	dts, err := os.ReadFile(tsClientDir + "/index.d.ts")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range declarationMismatches(string(dts), routeTable{Schemas: map[string][]string{"Usage": want["Usage"], "Cost": want["Cost"]}}) {
		t.Errorf("%s/index.d.ts: %s", tsClientDir, m)
	}
	event := regexp.MustCompile(`Durable<"` + regexp.QuoteMeta(keel.TypeBudgetWarning) + `", \{([^}]*)\}>`).FindStringSubmatch(string(dts))
	if event == nil {
		t.Errorf("%s/index.d.ts declares no %s event", tsClientDir, keel.TypeBudgetWarning)
	} else {
		var got []string
		for _, f := range regexp.MustCompile(`([a-z_]+)\??:`).FindAllStringSubmatch(event[1], -1) {
			got = append(got, f[1])
		}
		if d := setDiff(got, want["BudgetWarning"]); d != "" {
			t.Errorf("%s/index.d.ts: %s: fields %s", tsClientDir, keel.TypeBudgetWarning, d)
		}
	}

	py, err := os.ReadFile(pyClientDir + "/keel_client/types.py")
	if err != nil {
		t.Fatal(err)
	}
	for name, fields := range want {
		got, ok := pythonClassFields(string(py), name)
		if !ok {
			t.Errorf("%s/keel_client/types.py: no class %s", pyClientDir, name)
			continue
		}
		if d := setDiff(got, fields); d != "" {
			t.Errorf("%s/keel_client/types.py: %s: fields %s", pyClientDir, name, d)
		}
	}
}
