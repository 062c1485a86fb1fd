package config

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/hook"
	"github.com/keelrun/keel/server/worker"
)

// Hook is a webhook of the file (hooks.NAME): a hook the worker offers,
// served by an HTTP endpoint of the operator's.
type Hook struct {
	// Name is what runs and agents name it by, as an agent's name.
	Name string
	// URL receives the calls: https, or http to a loopback host.
	URL string
	// SecretEnv names the environment variable holding the signing
	// secret, read by the worker at start.
	SecretEnv string
	// Spec is where it runs (points), its timeout and its on_error.
	Spec hook.Spec
}

// Sink is an HTTP sink of the file (sinks.NAME): an endpoint that
// receives every durable event of the worker's sessions.
type Sink struct {
	Name string
	// URL receives the deliveries: https, or http to a loopback host.
	URL string
	// SecretEnv names the environment variable holding the signing
	// secret, read by the worker at start.
	SecretEnv string
	// Timeout bounds one delivery. Optional: hook.DefaultTimeout.
	Timeout time.Duration
}

func (p *parser) hooks(n *yaml.Node, field string) {
	p.entries(n, field, func(k, v *yaml.Node, f string) {
		h := Hook{Name: p.hookName(k, f)}
		p.mark(k, f)
		p.fields(v, f, map[string]func(*yaml.Node, string){
			"url":        func(n *yaml.Node, f string) { h.URL = p.hookURL(n, f) },
			"secret_env": func(n *yaml.Node, f string) { h.SecretEnv = p.secretEnv(n, f) },
			"points":     func(n *yaml.Node, f string) { h.Spec.Points = p.hookPoints(n, f) },
			"timeout":    func(n *yaml.Node, f string) { h.Spec.Timeout = keel.Duration(p.hookTimeout(n, f)) },
			"on_error": func(n *yaml.Node, f string) {
				switch h.Spec.OnError = p.str(n, f); h.Spec.OnError {
				case hook.OnErrorFail, hook.OnErrorContinue, "":
				default:
					p.errorf(n, f, "unknown policy %q: use %s or %s", h.Spec.OnError, hook.OnErrorFail, hook.OnErrorContinue)
				}
			},
		})
		if v.Kind == yaml.MappingNode {
			p.required(k, f, h.URL, h.SecretEnv)
			if h.Spec.Points == nil {
				p.errorf(k, f+".points", "required: the points where it runs (%s)", pointList())
			}
		}
		p.cfg.Hooks = append(p.cfg.Hooks, h)
	})
}

func (p *parser) sinks(n *yaml.Node, field string) {
	p.entries(n, field, func(k, v *yaml.Node, f string) {
		s := Sink{Name: p.hookName(k, f)}
		p.mark(k, f)
		p.fields(v, f, map[string]func(*yaml.Node, string){
			"url":        func(n *yaml.Node, f string) { s.URL = p.hookURL(n, f) },
			"secret_env": func(n *yaml.Node, f string) { s.SecretEnv = p.secretEnv(n, f) },
			"timeout":    func(n *yaml.Node, f string) { s.Timeout = p.hookTimeout(n, f) },
		})
		if v.Kind == yaml.MappingNode {
			p.required(k, f, s.URL, s.SecretEnv)
		}
		p.cfg.Sinks = append(p.cfg.Sinks, s)
	})
}

// hookName checks the name of a hook or a sink: runs name hooks as they
// name agents.
func (p *parser) hookName(k *yaml.Node, f string) string {
	if !api.ValidAgentName(k.Value) {
		p.errorf(k, f, "a name is 1 to %d letters, digits, '-' and '_', starting with a letter", api.MaxAgentNameBytes)
	}
	return k.Value
}

// hookURL reads where a hook or sink posts: as any URL of the file, and
// https unless the host is this machine, since a request carries a run's
// prompts and tool results.
func (p *parser) hookURL(n *yaml.Node, f string) string {
	s := p.httpURL(n, f)
	if s != "" && hook.CheckURL(s) != nil {
		p.errorf(n, f, "want https, or http to localhost or a loopback IP (the requests carry prompts and tool results)")
		return ""
	}
	return s
}

func (p *parser) secretEnv(n *yaml.Node, f string) string {
	if n.Kind != yaml.ScalarNode || !envName.MatchString(n.Value) {
		// The value is not echoed: a pasted secret lands here.
		p.errorf(n, f, "want the name of an environment variable (such as KEEL_HOOK_SECRET), not the secret")
		return ""
	}
	return n.Value
}

func (p *parser) hookPoints(n *yaml.Node, f string) []keel.HookPoint {
	names := p.strings(n, f)
	if names == nil {
		return nil
	}
	if len(names) == 0 {
		p.errorf(n, f, "is empty: name at least one of %s", pointList())
	}
	points := []keel.HookPoint{}
	for i, name := range names {
		pt := keel.HookPoint(name)
		switch {
		case name == "":
		case !slices.Contains(keel.HookPoints, pt):
			p.errorf(n.Content[i], fmt.Sprintf("%s[%d]", f, i), "unknown point %q (known: %s)", name, pointList())
		case slices.Contains(points, pt):
			p.errorf(n.Content[i], fmt.Sprintf("%s[%d]", f, i), "%q is listed twice", name)
		default:
			points = append(points, pt)
		}
	}
	return points
}

func (p *parser) hookTimeout(n *yaml.Node, f string) time.Duration {
	d, err := time.ParseDuration(p.str(n, f))
	if err != nil || d <= 0 || d > hook.MaxTimeout {
		p.errorf(n, f, "want a duration up to %s, such as 10s", hook.MaxTimeout)
		return 0
	}
	return d
}

// required reports a missing url or secret_env of the hook or sink at k.
func (p *parser) required(k *yaml.Node, f, url, secretEnv string) {
	if url == "" {
		p.errorf(k, f+".url", "required: where the worker posts")
	}
	if secretEnv == "" {
		p.errorf(k, f+".secret_env", "required: the environment variable holding the signing secret")
	}
}

func pointList() string {
	names := make([]string, len(keel.HookPoints))
	for i, pt := range keel.HookPoints {
		names[i] = string(pt)
	}
	return strings.Join(names, ", ")
}

// checkAgentHooks checks that an agent names only hooks of the file, each
// once, and no more than a run may.
func (p *parser) checkAgentHooks(a Agent) {
	f := "agents." + a.Name + ".hooks"
	if len(a.Hooks) > api.MaxRunHooks {
		p.errorAt(f, "at most %d hooks, not %d", api.MaxRunHooks, len(a.Hooks))
	}
	for i, name := range a.Hooks {
		switch {
		case name == "":
		case !slices.ContainsFunc(p.cfg.Hooks, func(h Hook) bool { return h.Name == name }):
			p.errorAt(f, "no hook named %q in this file", name)
		case slices.Contains(a.Hooks[:i], name):
			p.errorAt(f, "%q is listed twice", name)
		}
	}
}

// NewHooks returns the file's webhooks by name, reading each secret from
// its variable now: a variable not set is an *Error at its secret_env.
func (c *Config) NewHooks() (map[string]hook.Hook, error) {
	var errs Errors
	out := map[string]hook.Hook{}
	for _, h := range c.Hooks {
		f := "hooks." + h.Name
		secret, err := c.secret(f, h.SecretEnv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		w, werr := hook.NewWebhook(hook.WebhookConfig{URL: h.URL, Secret: secret, Spec: h.Spec})
		if werr != nil {
			errs = append(errs, c.errorAt(f, "%v", werr))
			continue
		}
		out[h.Name] = w
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// NewSinks returns the file's HTTP sinks by name, reading each secret
// from its variable now.
func (c *Config) NewSinks() (map[string]hook.Sink, error) {
	var errs Errors
	out := map[string]hook.Sink{}
	for _, s := range c.Sinks {
		f := "sinks." + s.Name
		secret, err := c.secret(f, s.SecretEnv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		hs, serr := hook.NewHTTPSink(hook.HTTPSinkConfig{Name: s.Name, URL: s.URL, Secret: secret, Timeout: s.Timeout})
		if serr != nil {
			errs = append(errs, c.errorAt(f, "%v", serr))
			continue
		}
		out[s.Name] = hs
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// secret reads the variable env names; the error names the variable,
// never a value.
func (c *Config) secret(field, env string) ([]byte, *Error) {
	v := os.Getenv(env)
	if v == "" {
		return nil, c.errorAt(field+".secret_env", "the environment variable %s is not set", env)
	}
	return []byte(v), nil
}

// applyHooks adds the file's hooks and sinks to those opts already holds
// (a program's own), refusing a name given twice.
func (c *Config) applyHooks(opts *worker.Options) error {
	hooks, err := c.NewHooks()
	if err != nil {
		return err
	}
	sinks, err := c.NewSinks()
	if err != nil {
		return err
	}
	var errs Errors
	for _, h := range c.Hooks {
		if _, ok := opts.Hooks[h.Name]; ok {
			errs = append(errs, c.errorAt("hooks."+h.Name, "the program offers a hook named %q already", h.Name))
		}
	}
	for _, s := range c.Sinks {
		if _, ok := opts.Sinks[s.Name]; ok {
			errs = append(errs, c.errorAt("sinks."+s.Name, "the program has a sink named %q already", s.Name))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	opts.Hooks = merged(opts.Hooks, hooks)
	opts.Sinks = merged(opts.Sinks, sinks)
	return nil
}

// merged returns have with add's entries, a new map unless add is empty.
func merged[V any](have, add map[string]V) map[string]V {
	if len(add) == 0 {
		return have
	}
	out := maps.Clone(have)
	if out == nil {
		out = map[string]V{}
	}
	maps.Copy(out, add)
	return out
}
