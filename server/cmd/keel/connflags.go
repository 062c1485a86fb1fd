package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/keelrun/keel/connect"
	"github.com/keelrun/keel/server/internal/stack"
)

// temporalFlags say how to reach Temporal, named as the temporal CLI names
// them and read, when not given, from the same environment variables and
// configuration profile.
type temporalFlags struct {
	address    string
	namespace  string
	apiKey     string
	tls        optionalBool
	caPath     string
	certPath   string
	keyPath    string
	serverName string
	noHostCert bool
	profile    string
	configFile string
}

func (t *temporalFlags) register(fs *flagSet) {
	fs.StringVar(&t.address, "address", "",
		"Temporal frontend `host:port` (default $"+connect.EnvAddress+", the profile's, else "+defaultAddress+")")
	fs.StringVar(&t.namespace, "namespace", "",
		"Temporal `namespace` (default $"+connect.EnvNamespace+", the profile's, else "+defaultNamespace+")")
	fs.StringVar(&t.apiKey, "api-key", "",
		"Temporal API `KEY`, sent as a bearer token; turns TLS on (default $"+connect.EnvAPIKey+
			", the profile's; prefer those: a flag shows in the process list)")
	fs.Var(&t.tls, "tls", "connect with TLS; --tls=false turns it off (default $"+connect.EnvTLS+
		", else on with an API key or any --tls-* flag)")
	fs.StringVar(&t.caPath, "tls-ca-path", "",
		"PEM `FILE` of the CA that signs the server's certificate (default $"+connect.EnvTLSCACert+", else the system's CAs)")
	fs.StringVar(&t.certPath, "tls-cert-path", "",
		"PEM `FILE` of the client certificate, for servers that require mutual TLS (default $"+connect.EnvTLSClientCert+")")
	fs.StringVar(&t.keyPath, "tls-key-path", "",
		"PEM `FILE` of the client certificate's key (default $"+connect.EnvTLSClientKey+")")
	fs.StringVar(&t.serverName, "tls-server-name", "",
		"`NAME` the server's certificate must be issued for (default $"+connect.EnvTLSServerName+", else the host of --address)")
	fs.BoolVar(&t.noHostCert, "tls-disable-host-verification", false,
		"accept any server certificate (tests only; default $"+connect.EnvTLSNoHostCheck+")")
	fs.StringVar(&t.profile, "profile", "",
		"`NAME` of the profile in Temporal's configuration file (default $"+connect.EnvProfile+", else \"default\")")
	fs.StringVar(&t.configFile, "config-file", "",
		"Temporal's TOML configuration `FILE` (default $"+connect.EnvConfigFile+", else temporalio/temporal.toml in the user's configuration directory)")
}

// options returns what the flags say; the environment and the profile
// fill in the rest when the options are resolved.
func (t *temporalFlags) options() connect.Options {
	o := connect.Options{HostPort: t.address, Namespace: t.namespace, APIKey: t.apiKey,
		Profile: t.profile, ConfigFile: t.configFile}
	anyTLS := t.caPath != "" || t.certPath != "" || t.keyPath != "" || t.serverName != "" || t.noHostCert
	switch {
	case t.tls.set && !t.tls.value:
		o.TLS = &connect.TLS{Disabled: true}
	case t.tls.set || anyTLS:
		o.TLS = &connect.TLS{ServerCAFile: t.caPath, ClientCertFile: t.certPath, ClientKeyFile: t.keyPath,
			ServerName: t.serverName, DisableHostVerification: t.noHostCert}
	}
	return o
}

// resolve merges the flags with the environment and the profile, once,
// and keeps the address and namespace that result for messages. What it
// returns is what every client the command dials connects with.
func (t *temporalFlags) resolve() (stack.Conn, error) {
	c, err := stack.Resolve(t.options())
	if err != nil {
		return c, err
	}
	t.address, t.namespace = c.HostPort, c.Namespace
	return c, nil
}

// withServerHint adds, to a failure to connect whose cause is unknown, the
// likeliest one: no server there.
func withServerHint(err error) error {
	var de *connect.DialError
	if errors.As(err, &de) && de.Cause == nil {
		return fmt.Errorf("%w\nIs a server running there? Start one with `keel dev`, or pass --address", err)
	}
	return err
}

// optionalBool is a boolean flag that remembers whether it was given.
type optionalBool struct {
	value, set bool
}

func (b *optionalBool) String() string {
	if b == nil || !b.set {
		return ""
	}
	return strconv.FormatBool(b.value)
}

func (b *optionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.value, b.set = v, true
	return nil
}

// IsBoolFlag lets --tls stand alone, as --tls=true.
func (b *optionalBool) IsBoolFlag() bool { return true }
