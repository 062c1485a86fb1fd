package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The keel.yaml examples of the documentation parse: every ```yaml block
// that starts with the line "# keel.yaml" in docs/config.md and the
// README, so the docs cannot drift from the code.
func TestDocumentedExamplesParse(t *testing.T) {
	for _, doc := range []string{"../../docs/config.md", "../../README.md"} {
		t.Run(filepath.Base(doc), func(t *testing.T) {
			data, err := os.ReadFile(doc)
			if err != nil {
				t.Fatal(err)
			}
			examples := yamlExamples(string(data))
			if len(examples) == 0 {
				t.Fatalf("%s has no ```yaml block starting with # keel.yaml", doc)
			}
			for _, ex := range examples {
				cfg, err := Parse(doc, []byte(ex))
				if err != nil {
					t.Errorf("the example of %s does not parse:\n%v", doc, err)
					continue
				}
				if len(cfg.Models) == 0 || len(cfg.MCPServers) == 0 || len(cfg.Approvals) == 0 {
					t.Errorf("the example of %s leaves out models, approvals or MCP servers", doc)
				}
			}
		})
	}
}

// yamlExamples returns the bodies of the ```yaml blocks of markdown whose
// first line is "# keel.yaml".
func yamlExamples(markdown string) []string {
	var out []string
	rest := markdown
	for {
		_, after, ok := strings.Cut(rest, "```yaml\n")
		if !ok {
			return out
		}
		body, tail, ok := strings.Cut(after, "```")
		if !ok {
			return out
		}
		if strings.HasPrefix(body, "# keel.yaml\n") {
			out = append(out, body)
		}
		rest = tail
	}
}
