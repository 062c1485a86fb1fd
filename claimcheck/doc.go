// Package claimcheck is the part of keel's content store that readers
// need: the reference payload that stands in a history for an offloaded
// value (encoding "keel/claim-check", data {"key":"sha256:...","size":N}),
// content keys, and a PayloadCodec that resolves references through a
// codec endpoint over HTTP.
//
// It does not open a store and has no blob-storage dependency, so the
// client compiles without cloud SDKs; package store builds the store and
// the offloading codec on top of it.
//
//	dc := claimcheck.NewRemoteDataConverter("http://127.0.0.1:7280/codec")
//	c, err := client.Dial(ctx, client.Options{DataConverter: dc})
package claimcheck
