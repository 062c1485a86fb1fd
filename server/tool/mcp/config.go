package mcp

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"time"
)

// ServerConfig describes one MCP server whose tools a worker offers to the
// model. Exactly one of Command (a stdio server the worker starts) and URL
// (a streamable-HTTP server) is set.
type ServerConfig struct {
	// Name identifies the server; its tools are offered to the model as
	// mcp__<Name>__<tool>. Required: letters, digits, '-' and '_'.
	Name string
	// Command is the program of a stdio server, started by the worker and
	// restarted for the next call when it exits. Optional; set it or URL.
	Command string
	// Args are Command's arguments. Optional.
	Args []string
	// Env holds variables for Command, added to a minimal environment
	// (PATH, HOME, USER, LOGNAME, SHELL, TERM, TMPDIR, LANG): the worker's
	// own environment holds provider keys and is not passed on. A value may
	// name environment variables of the worker as ${NAME}. Optional.
	Env map[string]string
	// URL is the endpoint of a streamable-HTTP server. Optional; set it or
	// Command.
	URL string
	// Headers are sent with every HTTP request to URL. A value may name
	// environment variables as ${NAME}; they are expanded by the worker
	// when it connects, so secrets stay out of configuration files and
	// workflow history. Optional.
	Headers map[string]string
	// Timeout is the start-to-close timeout of one call to a tool of this
	// server. Optional; default: tool.DefaultTimeout.
	Timeout time.Duration
	// MaxResponseBytes bounds one message the server sends: a stdio
	// server's line, an HTTP server's JSON body or one server-sent event.
	// A message over it fails the connection; the call in flight gets an
	// error result naming the limit (ErrResponseTooLarge), and the next
	// call connects again. Optional; default DefaultMaxResponseBytes.
	MaxResponseBytes int
	// Sampling lets this server ask the run's model during a call
	// (sampling), spending the run's tokens: set it only for servers the
	// operator trusts. Optional; default false (refused, unless
	// Options.Sampling allows it for every server).
	Sampling bool
}

// ConfigError says a ServerConfig is unusable: which server, which field,
// and why.
type ConfigError struct {
	Server  string
	Field   string
	Problem string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("mcp: server %q: %s: %s", e.Server, e.Field, e.Problem)
}

var serverNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`)

// Validate reports the first problem of c as a *ConfigError. It does not
// look at the environment: a ${NAME} that is not set is reported when the
// worker connects.
func (c ServerConfig) Validate() error {
	bad := func(field, format string, a ...any) error {
		return &ConfigError{Server: c.Name, Field: field, Problem: fmt.Sprintf(format, a...)}
	}
	if !serverNamePattern.MatchString(c.Name) {
		return bad("name", "use 1 to 40 letters, digits, '-' or '_'")
	}
	switch {
	case c.Command == "" && c.URL == "":
		return bad("command", "set command (a stdio server) or url (a streamable-HTTP server)")
	case c.Command != "" && c.URL != "":
		return bad("url", "set command or url, not both")
	case c.Command != "" && len(c.Headers) > 0:
		return bad("headers", "headers are for url servers; a stdio server takes env")
	case c.URL != "" && (len(c.Args) > 0 || len(c.Env) > 0):
		return bad("args", "args and env are for command servers")
	}
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("url", "%q is not an http or https URL", c.URL)
		}
	}
	if c.Timeout < 0 {
		return bad("timeout", "must not be negative")
	}
	if c.MaxResponseBytes < 0 {
		return bad("max_response_bytes", "must not be negative")
	}
	return nil
}

var envReference = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expand replaces every ${NAME} in v with the variable's value. A variable
// that is not set is an error naming it (an empty bearer token would only
// fail later, less clearly). Nothing else is special: a lone $ stays.
func expand(v string, lookup func(string) (string, bool)) (string, error) {
	var missing string
	out := envReference.ReplaceAllStringFunc(v, func(ref string) string {
		name := envReference.FindStringSubmatch(ref)[1]
		val, ok := lookup(name)
		if !ok && missing == "" {
			missing = name
		}
		return val
	})
	if missing != "" {
		return "", fmt.Errorf("environment variable %s is not set", missing)
	}
	return out, nil
}

// expandAll expands every value of m, naming the field and key of a value
// that cannot be expanded.
func (c ServerConfig) expandAll(field string, m map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(m))
	for k, v := range m {
		x, err := expand(v, os.LookupEnv)
		if err != nil {
			return nil, &ConfigError{Server: c.Name, Field: field + "." + k, Problem: err.Error()}
		}
		out[k] = x
	}
	return out, nil
}
