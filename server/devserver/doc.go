// Package devserver runs a real Temporal server inside the current process:
// SQLite persistence (a file, or memory for tests) or PostgreSQL
// (Config.Postgres), the namespace keel uses with its search attributes,
// the Temporal Web UI, optional TLS, and dynamic config tuned for the
// latency of one agent step (TunedDynamicConfig). It backs `keel dev`,
// keel's end-to-end tests and its benchmarks.
//
//	s, err := devserver.Start(ctx, devserver.Config{DataDir: ".keel"})
//	if err != nil {
//		return err
//	}
//	defer s.Stop()
//	c, err := s.Dial(ctx, client.Options{}) // or client.Dial with s.Address()
//
// Tests start one with server/internal/keeltest.StartServer, which picks free
// ports, skips the Web UI, logs to the test and stops the server when the
// test ends.
//
// Package bench measures round trips on it; this package measures nothing.
//
// Stop releases every port and stops all of the server's work. A few idle
// gRPC client connections that Temporal's services never close stay behind,
// about thirty goroutines a server, plus, for an in-memory server, its
// database, which the SQLite plugin keeps for the life of the process.
package devserver
