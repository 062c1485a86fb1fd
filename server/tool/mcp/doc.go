// Package mcp offers the tools of Model Context Protocol servers as keel
// tools, through the official Go SDK (github.com/modelcontextprotocol/go-sdk).
//
// Connect starts stdio servers (Command, Args, Env) or reaches
// streamable-HTTP ones (URL, Headers with ${ENV} expansion), lists their
// tools and registers each in a tool.Registry as mcp__<server>__<tool>
// with the server's input schema. The list is read again when a server
// says it changed. Each call then runs like any registered tool, in its
// own Tool activity: the server's timeout, Temporal's retry policy,
// approval policies keyed by the tool's name.
//
//	reg, err := tool.Builtins("/srv/agent-workspace")
//	if err != nil { ... }
//	servers, err := mcp.Connect(ctx, []mcp.ServerConfig{
//		{Name: "everything", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-everything"}},
//		{Name: "search", URL: "https://mcp.example.com/mcp",
//			Headers: map[string]string{"Authorization": "Bearer ${SEARCH_TOKEN}"}},
//	}, mcp.Options{Registry: reg})
//	if err != nil { ... }
//	defer servers.Close()
//	w, err := worker.New(c, worker.Options{Tools: reg})
//
// worker.Options.MCPServers (keel.yaml's mcp_servers) does the same for a
// worker and closes the servers when it stops.
//
// A call maps the server's answer to a tool result: text content as text,
// structured content as JSON, isError and JSON-RPC errors as error results
// the model sees. Cancelling the call's context sends notifications/cancelled;
// progress notifications become tool.progress events; a stdio server that
// exits is started again for the next call. An elicitation becomes a
// host-input question (tool.Ask): the call ends, the run waits for the
// host, and the call is made again with the answer (docs/tools.md).
package mcp
