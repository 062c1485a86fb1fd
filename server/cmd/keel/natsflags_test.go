package main

import (
	"bytes"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/keelrun/keel/internal/testpki"
	"github.com/keelrun/keel/server/natsserver"
)

// natsFlagsFrom parses args as a NATS-dialling command's flags do.
func natsFlagsFrom(t *testing.T, args ...string) *connFlags {
	t.Helper()
	var c connFlags
	fs := newFlagSet("run", "keel run", "")
	c.register(fs, true)
	var out, errOut bytes.Buffer
	if _, code, ok := fs.parse(args, &out, &errOut, 0, -1); !ok {
		t.Fatalf("parse %q: status %d: %s", args, code, errOut.String())
	}
	return &c
}

// dialWith connects to url as a command with these flags would.
func dialWith(t *testing.T, url string, args ...string) error {
	t.Helper()
	c := natsFlagsFrom(t, append([]string{"--nats", url}, args...)...)
	opts, err := c.natsAuth.dialOptions(c.nats)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(c.nats, append(opts, nats.Timeout(5*time.Second))...)
	if err == nil {
		nc.Close()
	}
	return err
}

func secretFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func wantAuthError(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("%s: %v, want an authorization violation", what, err)
	}
}

// Each way to authenticate, through its flags and through its
// environment variables, against the real embedded server: no
// credentials, wrong ones and the right ones.
func TestNATSFlagsAuthenticate(t *testing.T) {
	t.Setenv(envConfigDir, t.TempDir()) // no keel dev records here
	user, _ := nkeys.CreateUser()
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	seedFile, otherSeedFile := secretFile(t, string(seed)+"\n"), secretFile(t, string(otherSeed))

	start := func(opts natsserver.Options) string {
		opts.Port = natsserver.RandomPort
		srv, err := natsserver.Start(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Shutdown)
		return srv.ClientURL()
	}
	t.Run("token", func(t *testing.T) {
		url := start(natsserver.Options{Token: "tok-4f1a"})
		wantAuthError(t, "none", dialWith(t, url))
		wantAuthError(t, "wrong file", dialWith(t, url, "--nats-token-file", secretFile(t, "tok-4f1b")))
		if err := dialWith(t, url, "--nats-token-file", secretFile(t, "  tok-4f1a\n")); err != nil {
			t.Errorf("--nats-token-file: %v", err)
		}
		t.Setenv(envNATSToken, "tok-4f1a")
		if err := dialWith(t, url); err != nil {
			t.Errorf("$%s: %v", envNATSToken, err)
		}
		t.Setenv(envNATSToken, "")
		t.Setenv(envNATSTokenFile, secretFile(t, "tok-4f1a"))
		if err := dialWith(t, url); err != nil {
			t.Errorf("$%s: %v", envNATSTokenFile, err)
		}
	})
	t.Run("user and password", func(t *testing.T) {
		url := start(natsserver.Options{User: "keel", Password: "pw-77"})
		wantAuthError(t, "none", dialWith(t, url))
		wantAuthError(t, "wrong password", dialWith(t, url, "--nats-user", "keel", "--nats-password-file", secretFile(t, "pw-78")))
		wantAuthError(t, "wrong user", dialWith(t, url, "--nats-user", "leek", "--nats-password-file", secretFile(t, "pw-77")))
		if err := dialWith(t, url, "--nats-user", "keel", "--nats-password-file", secretFile(t, "pw-77")); err != nil {
			t.Errorf("flags: %v", err)
		}
		t.Setenv(envNATSUser, "keel")
		t.Setenv(envNATSPassword, "pw-77")
		if err := dialWith(t, url); err != nil {
			t.Errorf("$%s and $%s: %v", envNATSUser, envNATSPassword, err)
		}
	})
	t.Run("nkey", func(t *testing.T) {
		url := start(natsserver.Options{NKeys: []string{pub}})
		wantAuthError(t, "none", dialWith(t, url))
		wantAuthError(t, "another seed", dialWith(t, url, "--nats-nkey-file", otherSeedFile))
		if err := dialWith(t, url, "--nats-nkey-file", seedFile); err != nil {
			t.Errorf("--nats-nkey-file: %v", err)
		}
		t.Setenv(envNATSNKeyFile, seedFile)
		if err := dialWith(t, url); err != nil {
			t.Errorf("$%s: %v", envNATSNKeyFile, err)
		}
	})
	t.Run("creds file", func(t *testing.T) {
		url, creds, otherCreds := startOperatorServer(t)
		wantAuthError(t, "none", dialWith(t, url))
		wantAuthError(t, "another operator's user", dialWith(t, url, "--nats-creds-file", otherCreds))
		if err := dialWith(t, url, "--nats-creds-file", creds); err != nil {
			t.Errorf("--nats-creds-file: %v", err)
		}
		t.Setenv(envNATSCredsFile, creds)
		if err := dialWith(t, url); err != nil {
			t.Errorf("$%s: %v", envNATSCredsFile, err)
		}
	})
}

// startOperatorServer runs a NATS server in operator (JWT) mode and
// returns its URL, a creds file of a user it trusts and one of a user of
// another operator.
func startOperatorServer(t *testing.T) (url, creds, otherCreds string) {
	t.Helper()
	mkCreds := func() (*jwt.OperatorClaims, string, string) {
		op, _ := nkeys.CreateOperator()
		opPub, _ := op.PublicKey()
		oc := jwt.NewOperatorClaims(opPub)
		oc.Name = "keel-test"
		if _, err := oc.Encode(op); err != nil {
			t.Fatal(err)
		}
		acc, _ := nkeys.CreateAccount()
		accPub, _ := acc.PublicKey()
		ac := jwt.NewAccountClaims(accPub)
		accJWT, err := ac.Encode(op)
		if err != nil {
			t.Fatal(err)
		}
		usr, _ := nkeys.CreateUser()
		usrPub, _ := usr.PublicKey()
		uc := jwt.NewUserClaims(usrPub)
		usrJWT, err := uc.Encode(acc)
		if err != nil {
			t.Fatal(err)
		}
		usrSeed, _ := usr.Seed()
		file, err := jwt.FormatUserConfig(usrJWT, usrSeed)
		if err != nil {
			t.Fatal(err)
		}
		return oc, accJWT, secretFile(t, string(file))
	}
	oc, accJWT, creds := mkCreds()
	_, _, otherCreds = mkCreds()
	resolver := &server.MemAccResolver{}
	claims, err := jwt.DecodeAccountClaims(accJWT)
	if err != nil {
		t.Fatal(err)
	}
	if err := resolver.Store(claims.Subject, accJWT); err != nil {
		t.Fatal(err)
	}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		TrustedOperators: []*jwt.OperatorClaims{oc}, AccountResolver: resolver})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(5 * time.Second) {
		t.Fatal("operator-mode server not ready")
	}
	return srv.ClientURL(), creds, otherCreds
}

// TLS through the flags: the server's CA, and a client certificate for a
// server that requires one.
func TestNATSFlagsTLS(t *testing.T) {
	t.Setenv(envConfigDir, t.TempDir())
	pki := testpki.New(t)
	srv, err := natsserver.Start(natsserver.Options{Port: natsserver.RandomPort, TLS: &tls.Config{
		Certificates: []tls.Certificate{pki.Server}, ClientCAs: pki.CAs,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	url := srv.ClientURL()
	if err := dialWith(t, url); err == nil {
		t.Error("connected without trusting the server's CA")
	}
	if err := dialWith(t, url, "--nats-tls-ca-file", pki.CAFile); err == nil {
		t.Error("connected without the client certificate the server requires")
	}
	full := []string{"--nats-tls-ca-file", pki.CAFile, "--nats-tls-cert-file", pki.ClientCertFile, "--nats-tls-key-file", pki.ClientKeyFile}
	if err := dialWith(t, url, full...); err != nil {
		t.Errorf("with CA and client certificate: %v", err)
	}
	if err := dialWith(t, url, append(full, "--nats-tls-server-name", testpki.TLSServerName)...); err != nil {
		t.Errorf("with --nats-tls-server-name %s: %v", testpki.TLSServerName, err)
	}
	if err := dialWith(t, url, append(full, "--nats-tls-server-name", "elsewhere.test")...); err == nil {
		t.Error("connected to a server whose certificate is not for --nats-tls-server-name")
	}
	t.Setenv(envNATSTLSCAFile, pki.CAFile)
	t.Setenv(envNATSTLSCertFile, pki.ClientCertFile)
	t.Setenv(envNATSTLSKeyFile, pki.ClientKeyFile)
	if err := dialWith(t, url); err != nil {
		t.Errorf("with $%s, $%s and $%s: %v", envNATSTLSCAFile, envNATSTLSCertFile, envNATSTLSKeyFile, err)
	}
}

// Bad NATS settings are errors that say which flag, and never hold the
// secret.
func TestNATSFlagsErrors(t *testing.T) {
	t.Setenv(envConfigDir, t.TempDir())
	const secret = "s3cr3t-c0ntent"
	tok := secretFile(t, secret)
	pki := testpki.New(t)
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{args: []string{"--nats-token-file", tok, "--nats-user", "u", "--nats-password-file", tok}, want: "choose one"},
		{args: []string{"--nats-token-file", tok, "--nats-nkey-file", tok}, want: "--nats-nkey-file"},
		{args: []string{"--nats-user", "u"}, want: "needs a password"},
		{args: []string{"--nats-password-file", tok}, want: "needs --nats-user"},
		{env: map[string]string{envNATSPassword: secret}, want: "needs --nats-user"},
		{args: []string{"--nats-token-file", filepath.Join(t.TempDir(), "missing")}, want: "--nats-token-file"},
		{args: []string{"--nats-token-file", secretFile(t, secret+"\n"+secret)}, want: "one line"},
		{args: []string{"--nats-token-file", secretFile(t, "\n\n")}, want: "one line"},
		{args: []string{"--nats-token-file", secretFile(t, strings.Repeat("x", maxSecretFile+1))}, want: "over"},
		{args: []string{"--nats-nkey-file", tok}, want: "--nats-nkey-file"},
		{args: []string{"--nats-creds-file", filepath.Join(t.TempDir(), "missing")}, want: "--nats-creds-file"},
		{args: []string{"--nats-tls-cert-file", pki.ClientCertFile}, want: "go together"},
		{args: []string{"--nats-tls-ca-file", tok}, want: "no PEM certificate"},
		{args: []string{"--nats-tls-cert-file", pki.ClientCertFile, "--nats-tls-key-file", tok}, want: "not a certificate and its key"},
	} {
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		c := natsFlagsFrom(t, tc.args...)
		_, err := c.natsAuth.dialOptions(c.nats)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %v: %v, want an error with %q", tc.args, tc.env, err, tc.want)
		} else if strings.Contains(err.Error(), secret) {
			t.Errorf("%q: the error holds the secret: %v", tc.args, err)
		}
		for k := range tc.env {
			t.Setenv(k, "")
		}
	}
}

// A URL's credentials never show in what keel prints about the live
// channel.
func TestNATSURLIsRedacted(t *testing.T) {
	for in, want := range map[string]string{
		"nats://keel:pw-77@nats.internal:4222":                      "nats://nats.internal:4222",
		"nats://tok-4f1a@nats.internal:4222,nats://b.internal:4222": "nats://nats.internal:4222,nats://b.internal:4222",
		"nats://127.0.0.1:4222":                                     "nats://127.0.0.1:4222",
	} {
		if got := liveRedact(in); got != want {
			t.Errorf("liveRedact(%q) = %q, want %q", in, got, want)
		}
	}
}
