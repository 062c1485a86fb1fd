// Package gateway is keel's HTTP API: an http.Handler over a
// client.Client that lets programs in any language (and curl) send
// prompts, follow a session's events as JSON pages or Server-Sent Events,
// steer, answer host-input requests and cancel. `keel serve` runs it
// alone; `keel dev` mounts it on its HTTP listener.
//
//	kc, _ := client.Dial(ctx, client.Options{HostPort: "localhost:7233", Live: natsChannel})
//	keys, _ := gateway.LoadAPIKeys(keyFile) // "KEY scope=read prefix=team-a-" a line
//	gw, _ := gateway.New(kc, gateway.Options{Keys: keys})
//	defer gw.Close()
//	if err := gateway.CheckListen(addr, len(keys) > 0); err != nil {
//		return err
//	}
//	http.ListenAndServe(addr, gw)
//
// Routes live under /v1 (docs/gateway.md, and the OpenAPI document at
// /v1/openapi.json); POST /v1/ag-ui serves agent frontends that speak
// AG-UI, with keel's host-input requests as AG-UI interrupts. Errors are typed bodies {"code", "message"} carrying
// keel's error codes. Other handlers (another protocol, a web page) mount
// on the same gateway with Handle or HandlePublic and share its keys,
// CORS policy, body limit and logging; ReadJSON, WriteError, SSEWriter
// and OpenStream (a long response counted against MaxStreams and the
// client's own stream limits, and ended by Close) are there for them.
//
// The gateway trusts no caller: each key may be narrowed to reading and
// to a session-ID prefix, every stream is counted against its key's and
// its address's limits and every followed session against
// MaxFollowedSessions, a stream's cursor is its own (the session's shared
// follower never starts from it), and what the event streams write is
// built from validated values only (docs/gateway.md, "Security").
package gateway
