package natsserver_test

import (
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/keelrun/keel/internal/testpki"
	"github.com/keelrun/keel/server/natsserver"
)

func TestStart(t *testing.T) {
	t.Run("taken port", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		port := l.Addr().(*net.TCPAddr).Port
		_, err = natsserver.Start(natsserver.Options{Port: port, ReadyTimeout: 5 * time.Second})
		if err == nil || !strings.Contains(err.Error(), "cannot listen") {
			t.Errorf("Start on a taken port = %v, want a listen error", err)
		}
	})
	t.Run("all interfaces", func(t *testing.T) {
		srv, err := natsserver.Start(natsserver.Options{Host: "0.0.0.0", Port: natsserver.RandomPort})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Shutdown()
		if !strings.HasPrefix(srv.ClientURL(), "nats://127.0.0.1:") {
			t.Errorf("ClientURL() = %q, want a loopback URL", srv.ClientURL())
		}
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			t.Fatalf("connect to %s: %v", srv.ClientURL(), err)
		}
		nc.Close()
		srv.Shutdown()
		srv.Shutdown() // idempotent
	})
}

// connectTo dials srv with opts and returns the error, closing what
// connected.
func connectTo(srv *natsserver.Server, opts ...nats.Option) error {
	nc, err := nats.Connect(srv.ClientURL(), append([]nats.Option{nats.Timeout(5 * time.Second)}, opts...)...)
	if err == nil {
		nc.Close()
	}
	return err
}

// An embedded server with credentials turns away a client without them and
// one with wrong ones, each as an authorization violation, and takes the
// right ones.
func TestStartRequiresCredentials(t *testing.T) {
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	other, _ := nkeys.CreateUser()
	sign := func(kp nkeys.KeyPair) nats.Option {
		p, _ := kp.PublicKey()
		return nats.Nkey(p, kp.Sign)
	}
	// An impostor presents the right public key but cannot sign for it.
	impostor := nats.Nkey(pub, other.Sign)
	for _, tc := range []struct {
		name  string
		opts  natsserver.Options
		right nats.Option
		wrong []nats.Option
	}{
		{"token", natsserver.Options{Token: "s3cret-token"}, nats.Token("s3cret-token"),
			[]nats.Option{nats.Token("s3cret-tokem"), nats.UserInfo("s3cret-token", "")}},
		{"user and password", natsserver.Options{User: "keel", Password: "pa55word"}, nats.UserInfo("keel", "pa55word"),
			[]nats.Option{nats.UserInfo("keel", "pa55worm"), nats.UserInfo("leek", "pa55word"), nats.Token("pa55word")}},
		{"nkey", natsserver.Options{NKeys: []string{pub}}, sign(user),
			[]nats.Option{sign(other), impostor, nats.Token(pub)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Port = natsserver.RandomPort
			srv, err := natsserver.Start(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Shutdown()
			if err := connectTo(srv); !errors.Is(err, nats.ErrAuthorization) {
				t.Errorf("without credentials: %v, want an authorization violation", err)
			}
			for i, w := range tc.wrong {
				if err := connectTo(srv, w); !errors.Is(err, nats.ErrAuthorization) {
					t.Errorf("wrong credentials %d: %v, want an authorization violation", i, err)
				}
			}
			if err := connectTo(srv, tc.right); err != nil {
				t.Errorf("with the right credentials: %v", err)
			}
			// In process too: the pipe skips TCP, not authentication (a
			// refused in-process connection takes nats.go 10 s to give up
			// on, so only the right credentials are tried there).
			if err := connectTo(srv, nats.InProcessServer(srv), tc.right); err != nil {
				t.Errorf("in process with the right credentials: %v", err)
			}
		})
	}
}

func TestStartRefusesAmbiguousCredentials(t *testing.T) {
	user, _ := nkeys.CreateUser()
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	for _, opts := range []natsserver.Options{
		{Token: "t", User: "u", Password: "p"},
		{Token: "t", NKeys: []string{pub}},
		{User: "u"},
		{Password: "p"},
		{NKeys: []string{string(seed)}}, // a seed where the public key belongs
		{NKeys: []string{"UNOTAKEY"}},
	} {
		opts.Port = natsserver.RandomPort
		if srv, err := natsserver.Start(opts); err == nil {
			srv.Shutdown()
			t.Errorf("Start(%+v) succeeded", opts)
		} else if strings.Contains(err.Error(), string(seed)) {
			t.Errorf("the error repeats the seed: %v", err)
		}
	}
}

// With TLS the server takes TLS connections only; with a client CA, only
// clients with a certificate it signed.
func TestStartTLS(t *testing.T) {
	pki := testpki.New(t)
	roots := nats.Secure(&tls.Config{RootCAs: pki.CAs, MinVersion: tls.VersionTLS12})
	t.Run("server", func(t *testing.T) {
		srv, err := natsserver.Start(natsserver.Options{Port: natsserver.RandomPort,
			TLS: &tls.Config{Certificates: []tls.Certificate{pki.Server}, MinVersion: tls.VersionTLS12}})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Shutdown()
		if !strings.HasPrefix(srv.ClientURL(), "tls://") {
			t.Errorf("ClientURL() = %q, want tls://", srv.ClientURL())
		}
		if err := connectTo(srv); err == nil {
			t.Error("a client that does not trust the server's CA connected")
		}
		plain := strings.Replace(srv.ClientURL(), "tls://", "nats://", 1)
		if nc, err := nats.Connect(plain, nats.Timeout(5*time.Second)); err == nil {
			nc.Close()
			t.Error("a client without TLS connected")
		}
		if err := connectTo(srv, roots); err != nil {
			t.Errorf("with the CA: %v", err)
		}
	})
	t.Run("mutual", func(t *testing.T) {
		srv, err := natsserver.Start(natsserver.Options{Port: natsserver.RandomPort,
			TLS: &tls.Config{Certificates: []tls.Certificate{pki.Server}, ClientCAs: pki.CAs,
				ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Shutdown()
		if err := connectTo(srv, roots); err == nil {
			t.Error("a client without a certificate connected")
		}
		withCert := nats.Secure(&tls.Config{RootCAs: pki.CAs, Certificates: []tls.Certificate{pki.Client}, MinVersion: tls.VersionTLS12})
		if err := connectTo(srv, withCert); err != nil {
			t.Errorf("with a client certificate: %v", err)
		}
	})
}
