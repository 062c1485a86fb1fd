package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/keelrun/keel/claimcheck"
	"github.com/keelrun/keel/crypt"
	"github.com/keelrun/keel/live"
)

// The live channel's NATS connection: where the server is and how to
// authenticate, from flags and KEEL_NATS_* variables. Secrets come from
// files or the environment, never from a flag's value (which the process
// list shows).
const (
	envNATSURL             = "KEEL_NATS_URL"
	envNATSToken           = "KEEL_NATS_TOKEN"
	envNATSTokenFile       = "KEEL_NATS_TOKEN_FILE"
	envNATSUser            = "KEEL_NATS_USER"
	envNATSPassword        = "KEEL_NATS_PASSWORD"
	envNATSPasswordFile    = "KEEL_NATS_PASSWORD_FILE"
	envNATSNKeyFile        = "KEEL_NATS_NKEY_FILE"
	envNATSCredsFile       = "KEEL_NATS_CREDS_FILE"
	envNATSTLSCAFile       = "KEEL_NATS_TLS_CA_FILE"
	envNATSTLSCertFile     = "KEEL_NATS_TLS_CERT_FILE"
	envNATSTLSKeyFile      = "KEEL_NATS_TLS_KEY_FILE"
	envNATSTLSServerName   = "KEEL_NATS_TLS_SERVER_NAME"
	envNATSAcceptPlaintext = "KEEL_NATS_ACCEPT_PLAINTEXT"

	// maxSecretFile bounds a token or password file: a secret is a line.
	maxSecretFile = 4 << 10
	// liveDecodeTimeout bounds one request that decodes encrypted deltas
	// through the codec endpoint: a late delta is worth nothing.
	liveDecodeTimeout = 5 * time.Second
)

// natsFlags are how a command authenticates to NATS and what it accepts
// on the live channel; the URL itself is connFlags.nats.
type natsFlags struct {
	tokenFile    string
	user         string
	passwordFile string
	nkeyFile     string
	credsFile    string
	caFile       string
	certFile     string
	keyFile      string
	serverName   string
	// acceptPlaintext lets a command with encryption keys accept
	// plaintext deltas (a migration).
	acceptPlaintext bool
}

// defaultNATSURL is --nats's default: $KEEL_NATS_URL, else keel dev's.
func defaultNATSURL() string {
	if u := os.Getenv(envNATSURL); u != "" {
		return u
	}
	return defaultNATS
}

func (n *natsFlags) register(fs *flagSet) {
	fs.StringVar(&n.tokenFile, "nats-token-file", os.Getenv(envNATSTokenFile),
		"`FILE` holding the token the NATS server requires (default $"+envNATSTokenFile+"; $"+envNATSToken+" may hold the token itself)")
	fs.StringVar(&n.user, "nats-user", os.Getenv(envNATSUser),
		"user `NAME` for NATS, with --nats-password-file or $"+envNATSPassword+" (default $"+envNATSUser+")")
	fs.StringVar(&n.passwordFile, "nats-password-file", os.Getenv(envNATSPasswordFile),
		"`FILE` holding the NATS user's password (default $"+envNATSPasswordFile+")")
	fs.StringVar(&n.nkeyFile, "nats-nkey-file", os.Getenv(envNATSNKeyFile),
		"`FILE` holding a NATS user NKey seed, which signs the server's challenge (default $"+envNATSNKeyFile+")")
	fs.StringVar(&n.credsFile, "nats-creds-file", os.Getenv(envNATSCredsFile),
		"NATS credentials `FILE` (a user JWT and its NKey seed, as `nsc` writes them) (default $"+envNATSCredsFile+")")
	fs.StringVar(&n.caFile, "nats-tls-ca-file", os.Getenv(envNATSTLSCAFile),
		"PEM `FILE` of the CA that signs the NATS server's certificate; turns TLS on (default $"+envNATSTLSCAFile+", else the system's CAs with a tls:// URL)")
	fs.StringVar(&n.certFile, "nats-tls-cert-file", os.Getenv(envNATSTLSCertFile),
		"PEM `FILE` of a client certificate, for a NATS server that requires mutual TLS (default $"+envNATSTLSCertFile+")")
	fs.StringVar(&n.keyFile, "nats-tls-key-file", os.Getenv(envNATSTLSKeyFile),
		"PEM `FILE` of the client certificate's key (default $"+envNATSTLSKeyFile+")")
	fs.StringVar(&n.serverName, "nats-tls-server-name", os.Getenv(envNATSTLSServerName),
		"`NAME` the NATS server's certificate must be issued for (default $"+envNATSTLSServerName+", else the URL's host)")
	accept, _ := strconv.ParseBool(os.Getenv(envNATSAcceptPlaintext))
	fs.BoolVar(&n.acceptPlaintext, "nats-accept-plaintext", accept,
		"with --encryption-key-file, also accept unencrypted deltas, while workers without the key file still publish: a migration (default $"+envNATSAcceptPlaintext+")")
}

// explicit reports whether the flags or the environment name credentials.
func (n *natsFlags) explicit() bool {
	return n.tokenFile != "" || os.Getenv(envNATSToken) != "" || n.user != "" || n.passwordFile != "" ||
		os.Getenv(envNATSPassword) != "" || n.nkeyFile != "" || n.credsFile != ""
}

// dialOptions returns the nats.Options that authenticate to the server at
// url and set up TLS: the credentials the flags or the environment name,
// else, for a loopback URL, those keel dev recorded for it (see
// devnats.go). Its errors name files and flags, never a secret.
func (n *natsFlags) dialOptions(url string) ([]nats.Option, error) {
	var opts []nats.Option
	methods := 0
	token := os.Getenv(envNATSToken)
	if n.tokenFile != "" {
		var err error
		if token, err = readSecretFile("--nats-token-file", n.tokenFile); err != nil {
			return nil, err
		}
	}
	if token != "" {
		methods++
		opts = append(opts, nats.Token(token))
	}
	password := os.Getenv(envNATSPassword)
	if n.passwordFile != "" {
		var err error
		if password, err = readSecretFile("--nats-password-file", n.passwordFile); err != nil {
			return nil, err
		}
	}
	switch {
	case n.user != "" && password != "":
		methods++
		opts = append(opts, nats.UserInfo(n.user, password))
	case n.user != "":
		return nil, errors.New("--nats-user needs a password: --nats-password-file or $" + envNATSPassword)
	case password != "":
		return nil, errors.New("a NATS password (--nats-password-file or $" + envNATSPassword + ") needs --nats-user")
	}
	if n.nkeyFile != "" {
		methods++
		o, err := nats.NkeyOptionFromSeed(n.nkeyFile)
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey-file %s: not a readable user NKey seed: %w", n.nkeyFile, err)
		}
		opts = append(opts, o)
	}
	if n.credsFile != "" {
		methods++
		// nats.go reads the file at every connection; read it once now so
		// that a bad path is an error here rather than a failed dial.
		if _, err := os.Stat(n.credsFile); err != nil {
			return nil, fmt.Errorf("--nats-creds-file: %w", err)
		}
		opts = append(opts, nats.UserCredentials(n.credsFile))
	}
	if methods > 1 {
		return nil, errors.New("choose one way to authenticate to NATS: a token, a user and password, an NKey seed or a credentials file")
	}
	if methods == 0 {
		// A record that cannot be used is no credentials: the server
		// says whether it wants some.
		if seed := devNATSCredentials(url); seed != "" {
			if o, err := nats.NkeyOptionFromSeed(seed); err == nil {
				opts = append(opts, o)
			}
		}
	}
	tlsOpt, err := n.tls()
	if err != nil {
		return nil, err
	}
	if tlsOpt != nil {
		opts = append(opts, tlsOpt)
	}
	return opts, nil
}

// tls returns the TLS option the --nats-tls-* flags ask for, nil without
// any (a tls:// URL still turns TLS on, with the system's CAs).
func (n *natsFlags) tls() (nats.Option, error) {
	if n.caFile == "" && n.certFile == "" && n.keyFile == "" && n.serverName == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: n.serverName}
	if n.caFile != "" {
		pem, err := os.ReadFile(n.caFile)
		if err != nil {
			return nil, fmt.Errorf("--nats-tls-ca-file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--nats-tls-ca-file %s: no PEM certificate in it", n.caFile)
		}
	}
	switch {
	case n.certFile != "" && n.keyFile != "":
		cert, err := tls.LoadX509KeyPair(n.certFile, n.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--nats-tls-cert-file %s and --nats-tls-key-file %s: not a certificate and its key", n.certFile, n.keyFile)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case n.certFile != "" || n.keyFile != "":
		return nil, errors.New("--nats-tls-cert-file and --nats-tls-key-file go together")
	}
	return nats.Secure(cfg), nil
}

// readSecretFile reads a one-line secret, without its surrounding space.
func readSecretFile(flag, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	defer f.Close()
	b := make([]byte, maxSecretFile+1)
	n, _ := f.Read(b)
	if n > maxSecretFile {
		return "", fmt.Errorf("%s %s: over %d bytes; want the secret alone", flag, path, maxSecretFile)
	}
	s := strings.TrimSpace(string(b[:n]))
	if s == "" || strings.ContainsAny(s, "\r\n") {
		return "", fmt.Errorf("%s %s: want one line holding the secret", flag, path)
	}
	return s, nil
}

// liveOptions are the live channel's options for a command that reads (or,
// a worker, writes) with what cs holds: with encryption keys it encrypts
// and decrypts deltas and accepts only encrypted ones (unless
// --nats-accept-plaintext); a reader without keys that decodes through a
// codec endpoint decodes encrypted deltas there too, so `keel run` streams
// from an encrypting keel dev either way.
func (c *connFlags) liveOptions(cs *contentStore, extra ...nats.Option) (live.NATSOptions, error) {
	dial, err := c.natsAuth.dialOptions(c.nats)
	if err != nil {
		return live.NATSOptions{}, err
	}
	o := live.NATSOptions{Dial: append(dial, extra...), AcceptPlaintext: c.natsAuth.acceptPlaintext}
	switch {
	case cs.keys != nil:
		o.Encryption = crypt.NewCodec(cs.keys)
	case !c.store.worker && c.store.url == "" && c.store.endpoint != "":
		o.Decoder = claimcheck.NewRemoteCodec(c.store.endpoint, claimcheck.RemoteOptions{
			ModifyRequest: withCodecToken, Timeout: liveDecodeTimeout})
	}
	return o, nil
}

// dialLive connects the live channel as the flags say.
func (c *connFlags) dialLive(cs *contentStore, extra ...nats.Option) (*live.NATS, error) {
	o, err := c.liveOptions(cs, extra...)
	if err != nil {
		return nil, err
	}
	return live.DialNATS(c.nats, o)
}

// natsHint says what to do about a failed connection to NATS, "" when
// the error says it already.
func natsHint(err error) string {
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) {
		return "the NATS server wants other credentials: --nats-token-file, --nats-user with --nats-password-file, --nats-nkey-file or --nats-creds-file (a local keel dev's are found on their own while it runs)"
	}
	return ""
}

// liveRedact is live.RedactURL, for code where a variable is named live.
func liveRedact(u string) string { return live.RedactURL(u) }
