package mcp

import "time"

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
	// Env holds variables added to the worker's environment for Command.
	// Optional.
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
}
