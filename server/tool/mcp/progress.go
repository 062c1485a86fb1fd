package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/keelrun/keel/server/tool"
)

// The SDK hands a call its result as soon as it reads it, but queues
// notifications for a handler goroutine: progress notifications sent
// before the result may be handled after the call returned. So keel counts
// the progress notifications of each call as they are read off the wire
// (the stdio connection's messages, the HTTP response streams' bytes),
// and a call waits, before it returns, until all of them were published.

// progressDrain bounds the wait for notifications already read.
const progressDrain = time.Second

// countingConn counts progress notifications as they are read.
type countingConn struct {
	sdk.Connection
	s *server
}

// countingTransport wraps a stdio transport's connection.
type countingTransport struct {
	sdk.Transport
	s *server
}

func (t countingTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return countingConn{Connection: c, s: t.s}, nil
}

func (c countingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && !req.ID.IsValid() && req.Method == "notifications/progress" {
		c.s.progressRead(req.Params)
	}
	return msg, err
}

// sseCounter counts the progress notifications in an HTTP response's
// server-sent events as the SDK reads them.
type sseCounter struct {
	io.ReadCloser
	s    *server
	line []byte
}

func (r *sseCounter) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.line = append(r.line, p[:n]...)
	for {
		i := bytes.IndexByte(r.line, '\n')
		if i < 0 {
			break
		}
		if data, ok := bytes.CutPrefix(bytes.TrimRight(r.line[:i], "\r"), []byte("data:")); ok &&
			bytes.Contains(data, []byte("notifications/progress")) {
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if json.Unmarshal(data, &msg) == nil && msg.ID == nil && msg.Method == "notifications/progress" {
				r.s.progressRead(msg.Params)
			}
		}
		r.line = r.line[i+1:]
	}
	if len(r.line) > 16<<20 { // not SSE after all; stop buffering
		r.line = r.line[:0]
	}
	return n, err
}

// progressRead counts a progress notification read off the wire for its
// call.
func (s *server) progressRead(params json.RawMessage) {
	var p struct {
		Token any `json:"progressToken"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	token, ok := p.Token.(string)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.calls[token]; c != nil {
		c.mu.Lock()
		c.received++
		c.mu.Unlock()
	}
}

// progress publishes a server's progress notification as the call's
// tool.progress event.
func (s *server) progress(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
	token, _ := req.Params.ProgressToken.(string)
	s.mu.Lock()
	c := s.calls[token]
	s.mu.Unlock()
	if c == nil {
		return
	}
	tool.Progress(c.ctx, progressText(req.Params))
	c.mu.Lock()
	c.handled++
	if c.handled >= c.received {
		select {
		case c.drained <- struct{}{}:
		default:
		}
	}
	c.mu.Unlock()
}

// drain waits until every progress notification read for c was published.
func (c *call) drain() {
	deadline := time.After(progressDrain)
	for {
		c.mu.Lock()
		done := c.handled >= c.received
		c.mu.Unlock()
		if done {
			return
		}
		select {
		case <-c.drained:
		case <-deadline:
			return
		}
	}
}

// progressText renders a progress notification: "3/5", "3/5: message",
// or "3: message" when the total is unknown.
func progressText(p *sdk.ProgressNotificationParams) string {
	n := strconv.FormatFloat(p.Progress, 'f', -1, 64)
	if p.Total > 0 {
		n += "/" + strconv.FormatFloat(p.Total, 'f', -1, 64)
	}
	if p.Message != "" {
		return n + ": " + p.Message
	}
	return n
}
