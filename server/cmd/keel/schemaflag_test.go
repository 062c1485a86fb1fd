package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelrun/keel/api"
)

// --output-schema reads its file on the client, bounded and checked before
// anything is sent (docs/contract.md §21.1).
func TestOutputSchemaFlag(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var f schemaFlag
	good := write("good.json", `{"type":"object","required":["facts"]}`)
	if err := f.Set(good); err != nil || string(f.schema) != `{"type":"object","required":["facts"]}` {
		t.Fatalf("Set(good) = %v, schema %s", err, f.schema)
	}
	var p promptFlags
	p.outputSchema = f
	if got := p.config().OutputSchema; string(got) != string(f.schema) {
		t.Errorf("the run config carries the schema: %s", got)
	}
	for name, text := range map[string]string{
		"empty.json": "",
		"array.json": "[]",
		"big.json":   `{"description":"` + strings.Repeat("x", api.MaxOutputSchemaBytes) + `"}`,
		"deep.json":  strings.Repeat(`{"a":`, api.MaxOutputSchemaDepth+1) + "1" + strings.Repeat("}", api.MaxOutputSchemaDepth+1),
	} {
		var bad schemaFlag
		if err := bad.Set(write(name, text)); err == nil {
			t.Errorf("Set(%s) accepted it", name)
		}
	}
	var missing schemaFlag
	if err := missing.Set(filepath.Join(dir, "nope.json")); err == nil {
		t.Error("a missing file is an error")
	}
}

// --agent names an agent; with --model, --tools or --output-schema, which
// the agent defines, or with a name that cannot be one, the command
// refuses before it connects (docs/contract.md §21.2).
func TestAgentFlag(t *testing.T) {
	schema := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(schema, []byte(`{"type":"object"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, args := range [][]string{
		{"run", "--agent", "planner", "--model", "scripted:demo", "hi"},
		{"run", "--agent", "planner", "--tools", "read_file", "hi"},
		{"send", "--agent", "planner", "--output-schema", schema, "hi"},
		{"run", "--agent", "no spaces", "hi"},
	} {
		code, _, errOut := keelCmd(ctx, args...)
		if code != exitUsage || !strings.Contains(errOut, "--agent") {
			t.Errorf("keel %s: status %d, want %d\n%s", strings.Join(args, " "), code, exitUsage, errOut)
		}
	}
	var p promptFlags
	p.agent, p.model = "planner", api.DefaultModel
	if cfg := p.config(); cfg.Agent != "planner" || cfg.Model != "" || cfg.Tools != nil {
		t.Errorf("config %+v: the agent's own model and tools apply", cfg)
	}
}
