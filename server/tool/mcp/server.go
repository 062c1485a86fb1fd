package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/tool"
)

// ConnectTimeout bounds starting or reaching a server and listing its
// tools when the caller's context has no deadline.
const ConnectTimeout = 30 * time.Second

// server is one configured MCP server: its current session (nil while
// disconnected), its tools as registered, and the calls in flight.
type server struct {
	cfg  ServerConfig
	reg  *tool.Registry
	log  *slog.Logger
	conn sync.Mutex // held while connecting, so that one call connects
	// listing serializes listings, so that an older list never replaces
	// a newer one.
	listing sync.Mutex

	mu      sync.Mutex
	client  *sdk.Client
	session *sdk.ClientSession
	tools   map[string]*remoteTool // by keel name
	calls   map[string]*call       // by progress token
	seq     int64
	closed  bool
	changed func(server string, tools []string)
	// oversize is set when the server sent a message over its limit: the
	// connection fails, and the calls it fails say why.
	oversize atomic.Pointer[ResponseTooLargeError]
}

func newServer(cfg ServerConfig, opts Options, log *slog.Logger) *server {
	s := &server{cfg: cfg, reg: opts.Registry, log: log.With("mcp_server", cfg.Name),
		tools: map[string]*remoteTool{}, calls: map[string]*call{}, changed: opts.OnToolsChanged}
	var sample func(context.Context, *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error)
	if opts.Sampling || cfg.Sampling {
		sample = s.sample
	}
	s.client = sdk.NewClient(&sdk.Implementation{Name: "keel", Version: "1"}, &sdk.ClientOptions{
		// No roots; sampling only when allowed (otherwise servers do not
		// ask); elicitation in both modes, answered by keel's host.
		Capabilities: &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{
			Form: &sdk.FormElicitationCapabilities{}, URL: &sdk.URLElicitationCapabilities{}}},
		CreateMessageHandler:        sample,
		ElicitationHandler:          s.elicit,
		ProgressNotificationHandler: s.progress,
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			// Listing sends a request; the notification's handler must
			// not wait for its answer.
			go s.relist()
		},
	})
	return s
}

// sessionFor returns the current session, starting or reaching the server
// when there is none (the first call, or the first after it exited).
func (s *server) sessionFor(ctx context.Context) (*sdk.ClientSession, error) {
	s.mu.Lock()
	cs, closed := s.session, s.closed
	s.mu.Unlock()
	if closed {
		return nil, errors.New("mcp: the worker is closing its MCP servers")
	}
	if cs != nil {
		return cs, nil
	}
	s.conn.Lock()
	defer s.conn.Unlock()
	s.mu.Lock()
	cs = s.session
	s.mu.Unlock()
	if cs != nil {
		return cs, nil
	}
	return s.connect(ctx)
}

// connect starts or reaches the server, lists its tools and registers
// them. The caller holds s.conn.
func (s *server) connect(ctx context.Context) (*sdk.ClientSession, error) {
	s.oversize.Store(nil)
	t, err := s.transport()
	if err != nil {
		return nil, err
	}
	// The session outlives ctx (a call's, or Connect's): connect under a
	// context that ctx's end cancels but that carries no cancellation into
	// the session.
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(ConnectTimeout)
	}
	cctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	cs, err := s.client.Connect(cctx, t, nil)
	if err != nil {
		if tl := s.oversize.Load(); tl != nil {
			return nil, fmt.Errorf("mcp: server %q: connect: %w", s.cfg.Name, tl)
		}
		return nil, fmt.Errorf("mcp: server %q: connect: %w", s.cfg.Name, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = cs.Close()
		return nil, errors.New("mcp: the worker is closing its MCP servers")
	}
	s.session = cs
	s.mu.Unlock()
	go func() {
		// A stdio server that exits ends its session: the next call
		// starts it again.
		err := cs.Wait()
		s.mu.Lock()
		if s.session == cs {
			s.session = nil
			if !s.closed {
				s.log.Warn("mcp server session ended; the next call reconnects", "error", err)
			}
		}
		s.mu.Unlock()
	}()
	if err := s.list(cctx, cs); err != nil {
		s.drop(cs)
		return nil, fmt.Errorf("mcp: server %q: list tools: %w", s.cfg.Name, err)
	}
	return cs, nil
}

// drop forgets cs, if it is still the current session, and closes it in
// the background (a stdio server gets seconds to exit before SIGTERM).
func (s *server) drop(cs *sdk.ClientSession) {
	s.mu.Lock()
	if s.session == cs {
		s.session = nil
	}
	s.mu.Unlock()
	go func() { _ = cs.Close() }()
}

// relist lists the tools again after the server said its list changed.
func (s *server) relist() {
	s.mu.Lock()
	cs := s.session
	s.mu.Unlock()
	if cs == nil {
		return // the next connect lists them
	}
	ctx, cancel := context.WithTimeout(context.Background(), ConnectTimeout)
	defer cancel()
	if err := s.list(ctx, cs); err != nil {
		s.log.Warn("mcp server tools/list after list_changed failed", "error", err)
	}
}

// list reads the server's tools and brings the registry in line: new
// tools are registered, gone ones unregistered, changed ones updated.
func (s *server) list(ctx context.Context, cs *sdk.ClientSession) error {
	s.listing.Lock()
	defer s.listing.Unlock()
	var listed []*sdk.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return err
		}
		if len(listed) == MaxListedTools {
			s.log.Warn("mcp server lists more tools than keel offers; the rest are left out", "limit", MaxListedTools)
			break
		}
		listed = append(listed, t)
	}
	s.sync(listed)
	if s.changed != nil {
		s.changed(s.cfg.Name, s.names())
	}
	return nil
}

// sync brings the registry in line with the listed tools.
func (s *server) sync(listed []*sdk.Tool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	seen := map[string]bool{}
	for _, t := range listed {
		spec, check, err := s.specOf(t)
		if err != nil {
			s.log.Warn("mcp tool not offered", "tool", t.Name, "error", err)
			continue
		}
		seen[spec.Name] = true
		if rt, ok := s.tools[spec.Name]; ok {
			rt.update(spec, check)
			continue
		}
		rt := &remoteTool{srv: s, remote: t.Name}
		rt.update(spec, check)
		if err := s.reg.Register(rt); err != nil {
			s.log.Warn("mcp tool not offered", "tool", t.Name, "error", err)
			continue
		}
		s.tools[spec.Name] = rt
	}
	for name := range s.tools {
		if !seen[name] {
			s.reg.Unregister(name)
			delete(s.tools, name)
		}
	}
}

// toolNamePattern is what every provider accepts as a tool name.
var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ToolName returns the name the model sees for tool of server:
// mcp__<server>__<tool>.
func ToolName(server, tool string) string { return "mcp__" + server + "__" + tool }

// specOf returns the spec offered to the model for t, and the schema its
// arguments are checked against.
func (s *server) specOf(t *sdk.Tool) (keel.ToolSpec, json.RawMessage, error) {
	name := ToolName(s.cfg.Name, t.Name)
	if !toolNamePattern.MatchString(name) {
		return keel.ToolSpec{}, nil, fmt.Errorf("name %q is not 1 to 64 letters, digits, '_' or '-'", name)
	}
	check, err := json.Marshal(t.InputSchema)
	if err != nil {
		return keel.ToolSpec{}, nil, fmt.Errorf("input schema: %w", err)
	}
	if string(check) == "null" || string(check) == "{}" {
		check = json.RawMessage(`{"type":"object"}`)
	}
	if err := tool.CheckSchema(check); err != nil {
		return keel.ToolSpec{}, nil, err
	}
	// The model gets the schema without "$schema": providers want a bare
	// object schema. Arguments are still checked against the draft the
	// server named.
	var m map[string]any
	if err := json.Unmarshal(check, &m); err != nil {
		return keel.ToolSpec{}, nil, fmt.Errorf("input schema is not an object: %w", err)
	}
	delete(m, "$schema")
	params, _ := json.Marshal(m)
	desc := t.Description
	if desc == "" && t.Title != "" {
		desc = t.Title
	}
	return keel.ToolSpec{Name: name, Description: desc, Parameters: params}, check, nil
}

// names returns the keel names of the server's tools, sorted.
func (s *server) names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.tools))
	for n := range s.tools {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// close ends the session and unregisters the server's tools.
func (s *server) close() error {
	s.mu.Lock()
	s.closed = true
	cs := s.session
	s.session = nil
	for name := range s.tools {
		s.reg.Unregister(name)
	}
	s.tools = map[string]*remoteTool{}
	s.mu.Unlock()
	if cs != nil {
		return cs.Close()
	}
	return nil
}
