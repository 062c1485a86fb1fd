package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/keelrun/keel/server/provider/scripted"
	"github.com/keelrun/keel/server/worker"
)

// modelFlags are --scripts and --allow-model of keel worker and keel dev:
// what the worker offers its clients. A client names a model the worker
// offers; it never names a file (docs/providers.md).
type modelFlags struct {
	scripts string
	allow   allowFlag
}

func (m *modelFlags) register(fs *flagSet, scriptsDefault string) {
	fs.StringVar(&m.scripts, "scripts", "", "`DIR` of scripts offered as scripted:NAME (DIR/NAME.json; docs/scripted.md)"+scriptsDefault)
	fs.Var(&m.allow, "allow-model", "offer only what `PATTERN` matches: a model NAME, a spec (openai:gpt-4o) or a pattern ending in * (openai:*); repeat it for more (default: every model the worker holds)")
}

// check refuses bad --allow-model values before anything starts.
func (m *modelFlags) check() error {
	if err := worker.CheckAllow(m.allow); err != nil {
		return fmt.Errorf("--allow-model: %w", err)
	}
	return nil
}

// scriptsDir returns the scripts directory: an explicit --scripts wins,
// then the keel.yaml's scripts, then fallback ("" for none).
func (m *modelFlags) scriptsDir(fs *flagSet, conf *configFlag, fallback string) string {
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "scripts" })
	switch {
	case explicit:
		return m.scripts
	case conf != nil && conf.cfg != nil && conf.cfg.Scripts != "":
		return conf.cfg.Scripts
	}
	return fallback
}

// allowFlag is a repeatable flag; each value may also list patterns
// separated by commas.
type allowFlag []string

func (a *allowFlag) String() string { return strings.Join(*a, ",") }

func (a *allowFlag) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*a = append(*a, p)
		}
	}
	return nil
}

// newModels returns the worker's model catalogue: the built-in demo, the
// providers the environment configures, the scripts of dir (which must
// exist; "" for none) and, when allow is not empty, only what it matches. keel.yaml adds its named models and allow_models to it
// (configFlag.apply).
func newModels(dir string, allow []string) (*worker.Models, error) {
	models := worker.DefaultModels()
	if len(allow) > 0 {
		models.Allow = append([]string(nil), allow...)
	}
	if dir == "" {
		return models, nil
	}
	if fi, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("scripts: %s does not exist", dir)
	} else if err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("scripts: %s is not a directory", dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("scripts: %w", err)
	}
	scripts, err := scripted.OpenDir(abs)
	if err != nil {
		return nil, err
	}
	models.Scripts = scripts
	return models, nil
}

// scriptsNote is the banner line about the scripts directory.
func scriptsNote(dir string) string {
	if dir == "" {
		return "none (--scripts DIR offers DIR/NAME.json as scripted:NAME)"
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return dir + "  (scripted:NAME plays NAME.json)"
}
