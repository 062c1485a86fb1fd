package mcp

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/keelrun/keel/tool"
)

// The SDK hands a call its result as soon as it reads it, but queues
// notifications for a handler goroutine: the last progress notification,
// sent before the result, may be handled after the call returned. Over
// stdio keel therefore counts the progress notifications it reads for each
// call, and a call waits, before it returns, until all of them were
// published. (An HTTP connection cannot be wrapped the same way; there the
// last note may be lost.)

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
		var p struct {
			Token any `json:"progressToken"`
		}
		if json.Unmarshal(req.Params, &p) == nil {
			if token, ok := p.Token.(string); ok {
				c.s.mu.Lock()
				if cl := c.s.calls[token]; cl != nil {
					cl.mu.Lock()
					cl.received++
					cl.mu.Unlock()
				}
				c.s.mu.Unlock()
			}
		}
	}
	return msg, err
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
