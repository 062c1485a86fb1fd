package worker

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/keelrun/keel/logging"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/tool/mcp"
)

// MCPConnectTimeout bounds how long New waits for Options.MCPServers to
// start (or answer) and list their tools. A stdio server started with npx
// may first download its package.
const MCPConnectTimeout = 2 * time.Minute

// connectMCP connects the servers and registers their tools in tools;
// what the servers and their stderr say goes to log.
func connectMCP(servers []mcp.ServerConfig, tools *tool.Registry, log *zap.Logger) (*mcp.Servers, error) {
	ctx, cancel := context.WithTimeout(context.Background(), MCPConnectTimeout)
	defer cancel()
	ss, err := mcp.Connect(ctx, servers, mcp.Options{Registry: tools, Logger: logging.Slog(log.With(zap.String("component", "mcp")))})
	if err != nil {
		return nil, fmt.Errorf("worker: MCP servers: %w", err)
	}
	return ss, nil
}
