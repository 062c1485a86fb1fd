// Package gateway is keel's HTTP API: an http.Handler over a
// client.Client that lets programs in any language (and curl) send
// prompts, follow a session's events as JSON pages or Server-Sent Events,
// steer, answer host-input requests and cancel. `keel serve` runs it
// alone; `keel dev` mounts it on its HTTP listener.
//
//	kc, _ := client.Dial(ctx, client.Options{HostPort: "localhost:7233", Live: natsChannel})
//	gw, _ := gateway.New(kc, gateway.Options{APIKeys: keys})
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
// and OpenStream (a long response counted against MaxStreams and ended by
// Close) are there for them.
package gateway
