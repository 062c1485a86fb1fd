// Package testpki makes throwaway TLS certificate authorities for tests.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSServerName is a name the server certificate of New is issued for,
// besides localhost and 127.0.0.1.
const TLSServerName = "temporal.keel.test"

// PKI is a throwaway certificate authority and the server and client
// certificates it signed, made for one test: in memory, and as PEM files in
// the test's temporary directory for what reads files (the CLI, profiles).
type PKI struct {
	CAFile, ServerCertFile, ServerKeyFile, ClientCertFile, ClientKeyFile string

	CAs    *x509.CertPool
	Server tls.Certificate
	Client tls.Certificate
}

// New makes a CA, a server certificate for localhost, 127.0.0.1 and
// TLSServerName, and a client certificate, all ECDSA P-256.
func New(tb testing.TB) *PKI {
	tb.Helper()
	dir := tb.TempDir()
	caKey := newKey(tb)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "keel test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		tb.Fatalf("CA certificate: %v", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		tb.Fatalf("CA certificate: %v", err)
	}
	p := &PKI{CAs: x509.NewCertPool(), CAFile: filepath.Join(dir, "ca.pem")}
	p.CAs.AddCert(caCert)
	writePEM(tb, p.CAFile, "CERTIFICATE", caDER)

	issue := func(serial int64, name string, usage x509.ExtKeyUsage, dns []string, ips []net.IP) (tls.Certificate, string, string) {
		key := newKey(tb)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			DNSNames:     dns,
			IPAddresses:  ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			tb.Fatalf("%s certificate: %v", name, err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			tb.Fatalf("%s key: %v", name, err)
		}
		certFile, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		writePEM(tb, certFile, "CERTIFICATE", der)
		writePEM(tb, keyFile, "EC PRIVATE KEY", keyDER)
		leaf, _ := x509.ParseCertificate(der)
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, certFile, keyFile
	}
	p.Server, p.ServerCertFile, p.ServerKeyFile = issue(2, "server", x509.ExtKeyUsageServerAuth,
		[]string{"localhost", TLSServerName}, []net.IP{net.IPv4(127, 0, 0, 1)})
	p.Client, p.ClientCertFile, p.ClientKeyFile = issue(3, "client", x509.ExtKeyUsageClientAuth, nil, nil)
	return p
}

// ServerTLS returns the server side, for devserver.Config.TLS; with
// requireClientCert, clients must present a certificate of this CA.
func (p *PKI) ServerTLS(requireClientCert bool) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{p.Server}}
	if requireClientCert {
		cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, p.CAs
	}
	return cfg
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("key: %v", err)
	}
	return key
}

func writePEM(tb testing.TB, path, typ string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatalf("write %s: %v", path, err)
	}
}
