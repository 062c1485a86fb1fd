package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/keelrun/keel/server/tool"
)

// Options configures Connect.
type Options struct {
	// Registry receives the servers' tools, and loses them when a server
	// drops them or the servers close. Required.
	Registry *tool.Registry
	// Logger for connection events and servers' standard error (at debug
	// level). Default slog.Default().
	Logger *slog.Logger
	// Sampling lets every server ask the run's model during a call
	// (sampling): the Tool activity answers through keel's provider layer
	// and the run counts the usage. Default false: only the servers whose
	// ServerConfig.Sampling is set may; to the others keel advertises no
	// sampling capability, so they do not ask (refused by policy).
	Sampling bool
	// OnToolsChanged is called after each listing of a server's tools (at
	// connect, after the server said its list changed, after a restart)
	// with their keel names, sorted. Optional.
	OnToolsChanged func(server string, tools []string)
}

// Servers are the MCP servers of a worker, connected.
type Servers struct {
	byName map[string]*server
	order  []*server
}

// Connect starts (stdio) or reaches (HTTP) every server, lists its tools
// and registers them in opts.Registry as mcp__<server>__<tool>. It fails if
// a configuration is invalid or a server cannot be reached, closing the
// ones already connected. Close the returned Servers when the worker
// stops.
func Connect(ctx context.Context, configs []ServerConfig, opts Options) (*Servers, error) {
	if opts.Registry == nil {
		return nil, errors.New("mcp: Options.Registry is nil")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	ss := &Servers{byName: map[string]*server{}}
	for _, cfg := range configs {
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		if _, dup := ss.byName[cfg.Name]; dup {
			return nil, &ConfigError{Server: cfg.Name, Field: "name", Problem: "two servers have this name"}
		}
		s := newServer(cfg, opts, log)
		ss.byName[cfg.Name] = s
		ss.order = append(ss.order, s)
	}
	for _, s := range ss.order {
		if _, err := s.sessionFor(ctx); err != nil {
			_ = ss.Close()
			return nil, err
		}
	}
	return ss, nil
}

// Tools returns the keel names of a server's tools as last listed, sorted.
func (ss *Servers) Tools(server string) []string {
	s, ok := ss.byName[server]
	if !ok {
		return nil
	}
	return s.names()
}

// Close ends every session (stopping stdio servers) and unregisters the
// tools.
func (ss *Servers) Close() error {
	var errs []error
	for _, s := range ss.order {
		if err := s.close(); err != nil {
			errs = append(errs, fmt.Errorf("mcp: server %q: %w", s.cfg.Name, err))
		}
	}
	return errors.Join(errs...)
}
