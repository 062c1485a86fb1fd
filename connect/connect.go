package connect

import (
	"context"
	"crypto/tls"
	"fmt"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
)

// Defaults, Temporal's own, for what neither Options, the environment nor
// the profile says.
const (
	DefaultHostPort  = "localhost:7233"
	DefaultNamespace = "default"
)

// Environment variables keel reads, the same as Temporal's CLI and SDKs
// (the TLS ones have _DATA twins holding PEM instead of a path, and
// TEMPORAL_GRPC_META_* adds gRPC headers).
const (
	EnvAddress        = "TEMPORAL_ADDRESS"
	EnvNamespace      = "TEMPORAL_NAMESPACE"
	EnvAPIKey         = "TEMPORAL_API_KEY"
	EnvTLS            = "TEMPORAL_TLS"
	EnvTLSCACert      = "TEMPORAL_TLS_SERVER_CA_CERT_PATH"
	EnvTLSClientCert  = "TEMPORAL_TLS_CLIENT_CERT_PATH"
	EnvTLSClientKey   = "TEMPORAL_TLS_CLIENT_KEY_PATH"
	EnvTLSServerName  = "TEMPORAL_TLS_SERVER_NAME"
	EnvTLSNoHostCheck = "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION"
	EnvProfile        = "TEMPORAL_PROFILE"
	EnvConfigFile     = "TEMPORAL_CONFIG_FILE"
)

// Options say how to reach Temporal. Every field is optional; a field left
// unset is taken from the environment, then from the profile of Temporal's
// configuration file, then from the defaults above.
type Options struct {
	// HostPort of the Temporal frontend. Default: $TEMPORAL_ADDRESS, the
	// profile's address, else DefaultHostPort.
	HostPort string
	// Namespace. Default: $TEMPORAL_NAMESPACE, the profile's, else
	// DefaultNamespace.
	Namespace string
	// APIKey is sent with every call as "Authorization: Bearer KEY", and
	// turns TLS on unless TLS.Disabled. It never appears in an error or a
	// log. Default: $TEMPORAL_API_KEY, else the profile's api_key.
	APIKey string
	// TLS settings; each one set here wins over the environment's and the
	// profile's. Default: theirs, and no TLS unless they or an API key ask
	// for it.
	TLS *TLS
	// Profile of the configuration file to use. Default: $TEMPORAL_PROFILE,
	// else "default" (which may be absent; a profile named here or in
	// $TEMPORAL_PROFILE must exist).
	Profile string
	// ConfigFile is Temporal's TOML configuration file. Default:
	// $TEMPORAL_CONFIG_FILE, else temporalio/temporal.toml in the user's
	// configuration directory ($XDG_CONFIG_HOME or ~/.config on Linux). A
	// missing file is no error.
	ConfigFile string
	// IgnoreEnvironment reads neither the environment nor the configuration
	// file: only these fields and the defaults count (for connections that
	// must not pick up an operator's settings, such as keel dev's to its
	// own server). Default false.
	IgnoreEnvironment bool
	// Env looks environment variables up. Default: the process's.
	Env envconfig.EnvLookup
}

// TLS configures the connection's TLS. A non-nil TLS turns TLS on unless
// Disabled.
type TLS struct {
	// Disabled turns TLS off, even with an API key or a profile that turns
	// it on.
	Disabled bool
	// ServerCAFile is a PEM file of the CAs that sign the server's
	// certificate. Default: the system's roots.
	ServerCAFile string
	// ClientCertFile and ClientKeyFile are PEM files of the client's
	// certificate and key, for servers that require mutual TLS. Both or
	// neither.
	ClientCertFile string
	ClientKeyFile  string
	// ServerName the server's certificate must be issued for, also sent in
	// the handshake (SNI). Default: the host of HostPort.
	ServerName string
	// DisableHostVerification accepts any server certificate: for tests
	// and nothing else.
	DisableHostVerification bool
	// Config, when set, is the connection's TLS configuration as is, and
	// the fields above other than Disabled are ignored.
	Config *tls.Config
}

// Resolve merges o, the environment and the configuration file's profile
// into the Temporal SDK's client options: HostPort, Namespace, TLS,
// Credentials (the API key) and gRPC headers. Files named by TLS settings
// are read here.
func (o Options) Resolve() (client.Options, error) {
	var prof envconfig.ClientConfigProfile
	if !o.IgnoreEnvironment {
		var err error
		prof, err = envconfig.LoadClientConfigProfile(envconfig.LoadClientConfigProfileOptions{
			ConfigFilePath:    o.ConfigFile,
			ConfigFileProfile: o.Profile,
			EnvLookup:         o.Env,
		})
		if err != nil {
			return client.Options{}, fmt.Errorf("connect: Temporal configuration: %w", err)
		}
	}
	if o.HostPort != "" {
		prof.Address = o.HostPort
	}
	if o.Namespace != "" {
		prof.Namespace = o.Namespace
	}
	if o.APIKey != "" {
		prof.APIKey = o.APIKey
	}
	if o.TLS != nil {
		o.TLS.overlay(&prof)
	}
	// Codecs stay the caller's business (client.Options.DataConverter):
	// keel's own decode content-store references.
	prof.Codec = nil
	opts, err := prof.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		return client.Options{}, fmt.Errorf("connect: %w", err)
	}
	if o.TLS != nil && o.TLS.Config != nil && !o.TLS.Disabled {
		opts.ConnectionOptions.TLS = o.TLS.Config
	}
	if opts.HostPort == "" {
		opts.HostPort = DefaultHostPort
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	return opts, nil
}

// overlay writes the settings t makes onto prof's.
func (t *TLS) overlay(prof *envconfig.ClientConfigProfile) {
	if prof.TLS == nil {
		prof.TLS = &envconfig.ClientConfigTLS{}
	}
	pt := prof.TLS
	pt.Disabled = t.Disabled
	if t.ServerCAFile != "" {
		pt.ServerCACertPath, pt.ServerCACertData = t.ServerCAFile, nil
	}
	if t.ClientCertFile != "" || t.ClientKeyFile != "" {
		pt.ClientCertPath, pt.ClientCertData = t.ClientCertFile, nil
		pt.ClientKeyPath, pt.ClientKeyData = t.ClientKeyFile, nil
	}
	if t.ServerName != "" {
		pt.ServerName = t.ServerName
	}
	if t.DisableHostVerification {
		pt.DisableHostVerification = true
	}
}

// Dial connects to Temporal as o says. sdk carries the rest of the
// client's options (Logger, DataConverter, Interceptors, ...); its
// HostPort, Namespace, TLS, Credentials and headers are replaced by o's.
// A failure to connect is a *DialError that says, where it can find out,
// why: the server wants TLS or a client certificate, or does not trust
// this one, or this client does not trust the server's.
func Dial(ctx context.Context, o Options, sdk client.Options) (client.Client, error) {
	resolved, err := o.Resolve()
	if err != nil {
		return nil, err
	}
	return DialResolved(ctx, resolved, sdk)
}

// DialResolved is Dial for options already resolved (Options.Resolve),
// so a program that resolves once, and shows or checks what it got,
// dials exactly that: sdk's HostPort, Namespace, TLS, Credentials and
// headers are replaced by resolved's.
func DialResolved(ctx context.Context, resolved, sdk client.Options) (client.Client, error) {
	sdk.HostPort, sdk.Namespace = resolved.HostPort, resolved.Namespace
	sdk.Credentials, sdk.HeadersProvider = resolved.Credentials, resolved.HeadersProvider
	sdk.ConnectionOptions.TLS = resolved.ConnectionOptions.TLS
	sdk.ConnectionOptions.TLSDisabled = resolved.ConnectionOptions.TLSDisabled
	sdk.ConnectionOptions.Authority = resolved.ConnectionOptions.Authority
	c, err := client.DialContext(ctx, sdk)
	if err != nil {
		return nil, diagnose(ctx, sdk, err)
	}
	return c, nil
}
