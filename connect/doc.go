// Package connect says how keel reaches a Temporal server: address,
// namespace, TLS (with a client certificate for mutual TLS), API key. It
// reads what Temporal's own CLI and SDKs read, through the SDK's
// contrib/envconfig: the TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
// TEMPORAL_API_KEY and TEMPORAL_TLS* environment variables, and the
// profiles of Temporal's TOML configuration file (TEMPORAL_PROFILE,
// TEMPORAL_CONFIG_FILE). Options set in code win over the environment, and
// the environment over the file, so a Temporal user's setup works as is.
//
// keel's client.Dial and worker.Dial use it; any Temporal SDK client comes
// from Dial, and Resolve says which namespace it connects to:
//
//	conn := connect.Options{} // all from the environment and the profile
//	c, err := connect.Dial(ctx, conn, sdkclient.Options{})
//	if err != nil {
//		return err // a *DialError: "... the server requires a client certificate: give one with ..."
//	}
package connect
