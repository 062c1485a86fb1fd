package config

import (
	"errors"
	"os"
	"testing"
)

// FuzzParse feeds Parse arbitrary keel.yaml text: it never panics, it
// either returns a configuration or Errors that each name the file, and a
// configuration it returns is internally consistent (default_model names
// a model, allow_models entries are well formed).
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("testdata/keel.yaml"); err == nil {
		f.Add(data)
	}
	f.Add([]byte("models:\n  g:\n    provider: openai\n    model: m\n    api_key: sk-live\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.yaml", data)
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %v is not Errors", err)
			}
			for _, e := range es {
				if e.File != "fuzz.yaml" || e.Line < 0 || e.Column < 0 {
					t.Fatalf("error %+v does not name its place", e)
				}
			}
			return
		}
		if cfg.DefaultModel != "" {
			if _, ok := cfg.Model(cfg.DefaultModel); !ok {
				t.Fatalf("default_model %q names no model", cfg.DefaultModel)
			}
		}
		for _, m := range cfg.Models {
			if !IsModelName(m.Name) || m.Name == DefaultModelSpec {
				t.Fatalf("model name %q accepted", m.Name)
			}
		}
		if cfg.AllowModels != nil && len(cfg.AllowModels) == 0 {
			t.Fatal("an empty allow_models accepted")
		}
	})
}
