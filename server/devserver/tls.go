package devserver

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"time"

	"go.temporal.io/server/common/rpc/encryption"
)

// frontendTLS is the TLS of a server started with Config.TLS: what the
// frontend serves, and what the server's own clients (its system worker,
// the Web UI, Server.Dial) present to it.
type frontendTLS struct {
	server *tls.Config
	client *tls.Config
}

// errTLSCertificate reports a Config.TLS without a certificate to serve.
var errTLSCertificate = errors.New("devserver: Config.TLS needs the server's certificate in Certificates")

// newFrontendTLS derives both sides from the caller's server config. The
// server's own clients must get in even when client certificates are
// required, without the caller handing over a client key: so the server
// makes a throwaway client certificate, which its frontend accepts beside
// the caller's client CAs, and those clients trust exactly the frontend's
// own certificate (its name need not match the loopback address they dial).
func newFrontendTLS(cfg *tls.Config) (*frontendTLS, error) {
	if len(cfg.Certificates) == 0 || len(cfg.Certificates[0].Certificate) == 0 {
		return nil, errTLSCertificate
	}
	served := cfg.Certificates[0].Certificate[0]
	own, ownLeaf, err := selfClientCertificate()
	if err != nil {
		return nil, err
	}
	server := cfg.Clone()
	if server.ClientAuth >= tls.VerifyClientCertIfGiven {
		pool := x509.NewCertPool()
		if cfg.ClientCAs != nil {
			pool = cfg.ClientCAs.Clone()
		} else if system, err := x509.SystemCertPool(); err == nil {
			pool = system
		}
		pool.AddCert(ownLeaf)
		server.ClientCAs = pool
	}
	client := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{own},
		// Verification is VerifyConnection's pinning, below.
		InsecureSkipVerify: true, //nolint:gosec // pinned to the served certificate
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, served) {
				return errors.New("devserver: the frontend presented a certificate other than its own")
			}
			return nil
		},
	}
	return &frontendTLS{server: server, client: client}, nil
}

// provider serves the frontend with TLS; traffic between the server's
// services stays on loopback in plain gRPC.
func (f *frontendTLS) provider() encryption.TLSConfigProvider {
	return &encryption.FixedTLSConfigProvider{FrontendServerConfig: f.server, FrontendClientConfig: f.client}
}

// selfClientCertificate makes a self-signed ECDSA client certificate that
// lives as long as the process needs it.
func selfClientCertificate() (tls.Certificate, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("devserver: TLS client key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("devserver: TLS client certificate: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "keel devserver internal client"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("devserver: TLS client certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("devserver: TLS client certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, leaf, nil
}
