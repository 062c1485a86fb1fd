// Package crypt encrypts what keel writes to Temporal and to the content
// store: a PayloadCodec that seals every payload with AES-256-GCM under
// the current key of a Keyring and opens it with whichever key its
// metadata names, so payloads written before a rotation stay readable.
//
// Keys come from a key file, one "KEYID BASE64KEY" a line (32 bytes of
// key, standard base64), the first line the current key:
//
//	# newest first; old keys stay until no history holds their payloads
//	2026-12 0ZBg6t2tK3...=
//	2026-06 q8cTQ0i8Rb...=
//
// Workers and readers load the same file and put the codec in their data
// converter, after the content store's codec when there is one (the store
// codec takes it as store.CodecOptions.Encryption, so the store holds
// ciphertext too):
//
//	keys, err := crypt.LoadKeyFile("/etc/keel/keys")
//	if err != nil {
//		return err
//	}
//	dc := crypt.NewDataConverter(crypt.NewCodec(keys))
//	c, err := client.Dial(ctx, client.Options{DataConverter: dc})
//
// The codec decodes only ciphertext: a payload that is not encrypted
// fails with ErrPlaintext, so whoever writes to Temporal without the keys
// cannot hand a worker input of their own. Query arguments are the one
// exception, under a ReadOnly context (keel's worker registers its query
// handlers so); AllowPlaintext accepts every plaintext payload, for a
// deployment switching encryption on and for readers that decode through
// a codec endpoint:
//
//	reader := crypt.NewCodec(keys, crypt.AllowPlaintext())
//
// Key bytes never appear in an error message; errors name the file, the
// line and the key ID.
package crypt
