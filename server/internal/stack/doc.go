// Package stack assembles keel's stack once, from resolved options: the
// connection to Temporal (dialled from connection options, or to a server
// running in this process that the caller hands in), the content store
// and its codec, the live channel, a worker, and the HTTP gateway. It is
// the one composition root of `keel dev`, `keel worker`, keel-bench and
// the tests (server/internal/keeltest): none of them assembles these parts
// itself.
//
// The package never imports the embedded Temporal server (devserver):
// a binary built without it links this package too. A caller that runs
// one hands it in as a Server.
//
//	st, err := stack.Build(ctx, stack.Config{
//		Conn:   &conn, // conn, err := stack.Resolve(connect.Options{...}), once
//		Store:  stack.StoreConfig{URL: "file:///var/keel/store", Check: true},
//		NATS:   "nats://127.0.0.1:4222",
//		Worker: &worker.Options{Workspace: "./workspace"},
//	})
//	if err != nil {
//		return err
//	}
//	defer st.Stop()
package stack
