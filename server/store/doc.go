// Package store keeps large values out of Temporal workflow histories.
//
// A Store is a content-addressed store of immutable values in a blob
// bucket (a directory, S3 or an S3-compatible service, or memory): a value's
// key is the SHA-256 of its bytes, so storing the same bytes twice is a
// no-op, and every read is checked against its key.
//
// A Codec is a Temporal PayloadCodec on top of a Store that applies the
// claim-check pattern: payloads above a size threshold are stored and
// replaced with a small reference payload (encoding "keel/claim-check",
// data {"key":"sha256:...","size":N}), and references are resolved on the
// way back. Histories stay small, and since the codec is deterministic,
// replay sees the same references that were recorded. A payload larger
// than one chunk is stored as content-defined chunks and a tree of nodes
// over them, so payloads that share a prefix (a transcript run after run)
// share their objects; the reference names the tree's root, and
// references written before chunking (one object a value) still decode.
//
// A Collector deletes what nothing references: Mark every payload of the
// namespace's histories, then Sweep deletes the unmarked objects older
// than a grace period (keel store gc).
//
// Workers, which can reach the store, install the codec in their data
// converter:
//
//	s, err := store.Open(ctx, "s3://keel-values?region=eu-west-1")
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//	dc := store.NewDataConverter(store.NewCodec(s, store.CodecOptions{}))
//	c, err := client.Dial(ctx, client.Options{DataConverter: dc})
//
// Processes that cannot reach the store (a CLI, the Temporal Web UI) decode
// through an HTTP endpoint served by Codec.Handler, the UI directly and Go
// programs with package claimcheck, which holds the reference format and
// the remote codec without any blob-storage dependency:
//
//	http.Handle("/codec/", codec.Handler(store.HandlerOptions{AllowOrigin: "http://localhost:8233"}))
//
//	dc := claimcheck.NewRemoteDataConverter("http://worker:8080/codec")
//
// With CodecOptions.Encryption (keel's crypt.Codec) the Codec encrypts
// every payload before offloading it and decrypts after resolving it, so
// the store and the histories hold ciphertext, and the handler decrypts
// for the readers it serves. What Decode gets must then be ciphertext too
// (crypt.ErrPlaintext otherwise, unless the crypt codec allows
// plaintext): a reference is resolved first, and the object it names is
// decrypted.
package store
