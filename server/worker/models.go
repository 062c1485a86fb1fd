package worker

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/scripted"
)

// The worker decides which models exist: a client names a model the worker
// offers, never a file, a URL or a command (docs/providers.md). Models is
// that decision and the resolution of what it admits.

// Limits and names of the model catalogue.
const (
	// MaxModelSpecBytes bounds a model spec a client may name.
	MaxModelSpecBytes = 256
	// MaxModelLabels bounds the distinct values of the "model" label of
	// keel's metrics that models of a provider prefix (openai:MODEL) add:
	// past it, a model not named exactly by Models.Allow is labelled
	// OtherModelLabel (docs/observability.md).
	MaxModelLabels = 64
	// OtherModelLabel is the "model" label past MaxModelLabels.
	OtherModelLabel = "other"
	// DefaultModelName is the spec that names Models.Default.
	DefaultModelName = "default"
	// scriptedPrefix is the scripted provider's prefix: scripted:NAME.
	scriptedPrefix = "scripted"
	// maxOffered bounds the entries of Models.Offer.
	maxOffered = 24
)

// Models is a worker's model catalogue. It decides which model specs
// clients may name (Admits; the worker refuses a send naming anything else
// before its run starts) and resolves them to providers on the worker,
// where the API keys are (Resolve). The specs it holds:
//
//   - NAME and "default": the operator's named models (Named, Default);
//   - "scripted:demo", the built-in demo, and "scripted:NAME" for each
//     script of Scripts;
//   - "PREFIX:MODEL" for each prefix of Factories ("openai:gpt-4o").
//
// Allow narrows that to what the operator declares. Set the fields before
// the worker starts and leave them alone after.
type Models struct {
	// Named are the operator's models by name (keel.yaml's models).
	// Optional.
	Named map[string]NamedModel
	// Default is the name of Named that the spec "default" stands for.
	// Optional: without it "default" names nothing.
	Default string
	// Scripts holds the scripts of "scripted:NAME": a scripts directory
	// (scripted.OpenDir) or a scripted.Library. Optional: without it the
	// built-in "scripted:demo" is the only script.
	Scripts scripted.Source
	// Factories builds providers by prefix ("openai", "anthropic", or a
	// prefix of your own) for the specs "PREFIX:MODEL". Each is built once,
	// on its first use, and serves every model of its prefix; a build that
	// fails is tried again on the next use. Optional; DefaultModels holds
	// the providers configured in the worker's environment.
	Factories map[string]func() (provider.Provider, error)
	// Allow declares what clients may name: exact specs ("gpt", "default",
	// "scripted:demo", "openai:gpt-4o") and patterns ending in '*'
	// ("openai:*", "openai:gpt-4*", "scripted:*", "*"), checked with
	// CheckAllow. Optional. Nil offers everything the catalogue holds;
	// once set, only what it matches (and the catalogue holds) is offered.
	// "default" is offered when Allow matches it or the model it names.
	Allow []string

	// hints say which providers the environment could add (DefaultModels).
	hints []string

	mu        sync.Mutex
	providers map[string]*lazyProvider // by prefix: at most len(Factories)
	labels    map[string]bool          // model labels of prefix models: at most MaxModelLabels
}

// NamedModel is a model the operator named.
type NamedModel struct {
	// Provider serves it.
	Provider provider.Provider
	// Model is the provider's model name.
	Model string
}

// Catalog is a model resolver that also says which specs it offers. A
// worker whose Options.Models is a Catalog (Models is) refuses a send
// naming a spec it does not admit, with invalid_input, before the run
// starts; the resolver of any other type decides at the run's first model
// turn.
type Catalog interface {
	activities.ModelResolver
	// Admits reports whether clients may name spec. It is cheap (at most
	// a stat of a script file) and reads no file.
	Admits(spec string) bool
	// Offer describes what clients may name, for the message of a refused
	// spec; it is the same whatever spec was refused.
	Offer() string
}

var (
	_ Catalog                 = (*Models)(nil)
	_ activities.ModelLabeler = (*Models)(nil)
)

// demoScript is the built-in demo, parsed once.
var demoScript = sync.OnceValue(scripted.Demo)

type lazyProvider struct {
	done chan struct{} // closed once the build ended
	p    provider.Provider
	err  error
}

// Admits implements Catalog: the catalogue holds spec and Allow (if set)
// matches it.
func (m *Models) Admits(spec string) bool {
	if !m.holds(spec) {
		return false
	}
	if spec == DefaultModelName && matchAllow(m.Allow, m.Default) {
		return true
	}
	return matchAllow(m.Allow, spec)
}

// holds reports whether the catalogue has spec, whatever Allow says.
func (m *Models) holds(spec string) bool {
	if !plausibleSpec(spec) {
		return false
	}
	prefix, name, isSpec := strings.Cut(spec, ":")
	switch {
	case !isSpec && spec == DefaultModelName:
		_, ok := m.Named[m.Default]
		return ok && m.Default != ""
	case !isSpec:
		_, ok := m.Named[spec]
		return ok
	case name == "":
		return false
	case prefix == scriptedPrefix:
		// The name is checked before the source sees it: a path, "..",
		// or anything but a plain name never reaches the file system.
		if name == scripted.DemoName {
			return true
		}
		return m.Scripts != nil && scripted.ValidName(name) && m.Scripts.Has(name)
	default:
		_, ok := m.Factories[prefix]
		return ok
	}
}

// plausibleSpec bounds a spec and keeps control characters, spaces and
// invalid UTF-8 out of provider requests, logs and labels.
func plausibleSpec(spec string) bool {
	if spec == "" || len(spec) > MaxModelSpecBytes || !utf8.ValidString(spec) {
		return false
	}
	for _, r := range spec {
		if r <= ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

// matchAllow reports whether allow (nil: everything) matches spec.
func matchAllow(allow []string, spec string) bool {
	if allow == nil {
		return true
	}
	for _, a := range allow {
		if p, ok := strings.CutSuffix(a, "*"); ok {
			if strings.HasPrefix(spec, p) {
				return true
			}
		} else if a == spec {
			return true
		}
	}
	return false
}

// CheckAllow checks entries of Models.Allow: each a spec or a pattern
// whose only '*' ends it, of at most MaxModelSpecBytes printable bytes.
func CheckAllow(entries []string) error {
	for _, a := range entries {
		body, _ := strings.CutSuffix(a, "*")
		switch {
		case a == "":
			return fmt.Errorf("allowed model: empty; name a model (gpt, openai:gpt-4o) or a pattern (openai:*)")
		case strings.Contains(body, "*"):
			return fmt.Errorf("allowed model %q: '*' may only end a pattern (openai:*)", a)
		case a != "*" && !plausibleSpec(a):
			return fmt.Errorf("allowed model %q: want at most %d bytes without spaces or control characters", a, MaxModelSpecBytes)
		}
	}
	return nil
}

// Resolve implements activities.ModelResolver: the provider for spec and
// the model name to ask it for. A spec the catalogue does not admit is
// refused before anything is opened or built, with the same message
// whatever the spec; a provider or script that cannot be built fails with
// its reason. Both are a *keel.ProviderError of kind unknown_model, which
// fails the run at once.
func (m *Models) Resolve(spec string) (provider.Provider, string, error) {
	if !m.Admits(spec) {
		return nil, "", &keel.ProviderError{Provider: "keel", Kind: keel.ProviderUnknownModel,
			Message: "model not offered by this worker; it offers " + m.Offer()}
	}
	prefix, name, isSpec := strings.Cut(spec, ":")
	switch {
	case !isSpec:
		if spec == DefaultModelName {
			spec = m.Default
		}
		n := m.Named[spec]
		return n.Provider, n.Model, nil
	case prefix == scriptedPrefix && name == scripted.DemoName:
		return scripted.New(demoScript()), name, nil
	case prefix == scriptedPrefix:
		s, err := m.Scripts.Script(name)
		if err != nil {
			return nil, "", unknownModel(spec, err.Error())
		}
		return scripted.New(s), name, nil
	}
	p, err := m.provider(prefix)
	if err != nil {
		return nil, "", unknownModel(spec, err.Error())
	}
	return p, name, nil
}

// provider returns the provider of prefix, building it on first use
// without holding m.mu: other turns never wait for a build, and the uses
// of one prefix during its build share it.
func (m *Models) provider(prefix string) (provider.Provider, error) {
	m.mu.Lock()
	e, ok := m.providers[prefix]
	if ok {
		m.mu.Unlock()
		<-e.done
		return e.p, e.err
	}
	e = &lazyProvider{done: make(chan struct{})}
	if m.providers == nil {
		m.providers = map[string]*lazyProvider{}
	}
	m.providers[prefix] = e
	m.mu.Unlock()
	defer close(e.done)
	e.p, e.err = m.Factories[prefix]()
	if e.err == nil && e.p == nil {
		e.err = fmt.Errorf("no provider %q on this worker", prefix)
	}
	if e.err != nil {
		// Not kept: the next use tries again (a key set, a server up).
		m.mu.Lock()
		delete(m.providers, prefix)
		m.mu.Unlock()
	}
	return e.p, e.err
}

// ModelLabel implements activities.ModelLabeler: the "model" label of
// spec's metrics is the model's name, except that the models of a
// provider prefix that Allow does not name exactly get their own label
// for the first MaxModelLabels distinct names only, and OtherModelLabel
// after that, so invented names never add series without bound.
func (m *Models) ModelLabel(spec, model string) string {
	prefix, _, isSpec := strings.Cut(spec, ":")
	if !isSpec || prefix == scriptedPrefix || (m.Allow != nil && slices.Contains(m.Allow, spec)) {
		return model // bounded by what the operator provides
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.labels[model] {
		return model
	}
	if len(m.labels) >= MaxModelLabels {
		return OtherModelLabel
	}
	if m.labels == nil {
		m.labels = map[string]bool{}
	}
	m.labels[model] = true
	return model
}

// Offer implements Catalog: up to a couple of dozen of what the catalogue
// offers (names, "scripted:NAME" specs, patterns such as "openai:*"),
// and which providers the worker's environment could add.
func (m *Models) Offer() string {
	held := m.offered()
	var out []string
	if m.Allow == nil {
		out = held
	} else {
		for _, a := range m.Allow {
			if slices.Contains(out, a) {
				continue
			}
			if _, pattern := strings.CutSuffix(a, "*"); pattern && overlaps(a, held) || !pattern && m.Admits(a) {
				out = append(out, a)
			}
		}
	}
	more := len(out) > maxOffered
	if more {
		out = out[:maxOffered]
	}
	s := strings.Join(out, ", ")
	switch {
	case s == "":
		s = "no models"
	case more:
		s += ", …"
	}
	if m.Allow == nil && len(m.hints) > 0 {
		s += " (" + strings.Join(m.hints, "; ") + ")"
	}
	return s
}

// offered lists what the catalogue holds: names, scripted specs and the
// patterns of its prefixes, each family sorted.
func (m *Models) offered() []string {
	var out []string
	if m.Default != "" {
		if _, ok := m.Named[m.Default]; ok {
			out = append(out, DefaultModelName)
		}
	}
	names := make([]string, 0, len(m.Named))
	for name := range m.Named {
		names = append(names, name)
	}
	slices.Sort(names)
	out = append(out, names...)
	out = append(out, scriptedPrefix+":"+scripted.DemoName)
	if m.Scripts != nil {
		scripts, more := m.Scripts.Names(maxOffered)
		for _, name := range scripts {
			if name != scripted.DemoName {
				out = append(out, scriptedPrefix+":"+name)
			}
		}
		if more {
			out = append(out, scriptedPrefix+":…")
		}
	}
	prefixes := make([]string, 0, len(m.Factories))
	for prefix := range m.Factories {
		prefixes = append(prefixes, prefix+":*")
	}
	slices.Sort(prefixes)
	return append(out, prefixes...)
}

// overlaps reports whether the pattern (ending in '*') matches one of
// held, or shares specs with one of held's patterns.
func overlaps(pattern string, held []string) bool {
	p := strings.TrimSuffix(pattern, "*")
	for _, h := range held {
		if q, ok := strings.CutSuffix(h, "*"); ok {
			if strings.HasPrefix(p, q) || strings.HasPrefix(q, p) {
				return true
			}
		} else if strings.HasPrefix(h, p) {
			return true
		}
	}
	return false
}

func unknownModel(spec, why string) *keel.ProviderError {
	return &keel.ProviderError{Provider: "keel", Kind: keel.ProviderUnknownModel,
		Message: fmt.Sprintf("model %q: %s", spec, why)}
}

// CheckReasoning refuses, with a *keel.Error, a reasoning setting that
// the model spec names cannot take (provider.CheckReasoning). A spec the
// catalogue does not admit, or whose provider cannot be built, is left to
// the checks that refuse it.
func (m *Models) CheckReasoning(spec string, r keel.Reasoning) error {
	p, model, err := m.Resolve(spec)
	if err != nil {
		return nil
	}
	return provider.CheckReasoning(p, model, r)
}

// CheckInputs refuses, with a *keel.Error, attachments of kinds that the
// model spec names cannot read (provider.CheckInputs); as CheckReasoning,
// it leaves specs it cannot resolve to the checks that refuse them.
func (m *Models) CheckInputs(spec string, kinds []keel.AttachmentKind) error {
	p, model, err := m.Resolve(spec)
	if err != nil {
		return nil
	}
	return provider.CheckInputs(p, model, kinds)
}
