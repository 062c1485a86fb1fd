// Package natsserver runs an embedded NATS server for keel's live channel:
// `keel dev` starts one, and so do tests. It is apart from package live so
// that a client of the live channel does not compile the NATS server.
package natsserver

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// Defaults of Options.
const (
	DefaultHost         = "127.0.0.1"
	DefaultPort         = 4222
	DefaultReadyTimeout = 5 * time.Second
	// RandomPort asks for any free port; tests use it.
	RandomPort = -1
)

// Options configure an embedded NATS server. Every field is
// optional.
type Options struct {
	// Host is the address to listen on. Default DefaultHost
	// (127.0.0.1): `keel dev` is local unless asked otherwise; use "0.0.0.0"
	// to accept other machines.
	Host string
	// Port to listen on. 0 means DefaultPort (4222, NATS's own
	// default); RandomPort (-1) picks a free one.
	Port int
	// ReadyTimeout bounds the wait for the server to accept connections.
	// Default DefaultReadyTimeout.
	ReadyTimeout time.Duration

	// Authentication, at most one of the three; without any the server
	// takes every client (the tests' servers).

	// Token is the token every client must present (nats.Token).
	Token string
	// User and Password are the name and password every client must
	// present (nats.UserInfo); both or neither.
	User, Password string
	// NKeys are the public NKeys ("U…") of the users that may connect.
	// A client proves it holds the seed by signing the server's nonce
	// (nats.Nkey, nats.NkeyOptionFromSeed): no secret crosses the
	// connection, so a client that dialled the wrong server gives nothing
	// away. `keel dev` uses one.
	NKeys []string

	// TLS, when set, makes the server accept TLS connections only, with
	// this configuration (its certificate; with ClientAuth
	// tls.RequireAndVerifyClientCert and ClientCAs, mutual TLS).
	TLS *tls.Config
}

// auth checks the authentication options and puts them in so.
func (o Options) auth(so *server.Options) error {
	methods := 0
	if o.Token != "" {
		methods++
		so.Authorization = o.Token
	}
	if o.User != "" || o.Password != "" {
		methods++
		if o.User == "" || o.Password == "" {
			return errors.New("natsserver: User and Password go together")
		}
		so.Username, so.Password = o.User, o.Password
	}
	if len(o.NKeys) > 0 {
		methods++
		for i, k := range o.NKeys {
			if !nkeys.IsValidPublicUserKey(k) {
				// Not quoted: it may be a seed given by mistake.
				return fmt.Errorf("natsserver: NKeys[%d] is not a user's public NKey (one of 56 characters starting with U)", i)
			}
			so.Nkeys = append(so.Nkeys, &server.NkeyUser{Nkey: k})
		}
	}
	if methods > 1 {
		return errors.New("natsserver: choose one of Token, User and Password, NKeys")
	}
	if o.TLS != nil {
		so.TLS, so.TLSConfig = true, o.TLS
		so.TLSVerify = o.TLS.ClientAuth == tls.RequireAndVerifyClientCert
		so.TLSTimeout = 2
	}
	return nil
}

// Server is an in-process NATS server, for `keel dev` and tests. It logs
// nothing and ignores signals: its host process owns both.
type Server struct {
	srv *server.Server
	url string
}

// Start starts an embedded NATS server and returns once it
// accepts connections.
func Start(opts Options) (*Server, error) {
	if opts.Host == "" {
		opts.Host = DefaultHost
	}
	if opts.Port == 0 {
		opts.Port = DefaultPort
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	if opts.Port != RandomPort {
		// The server only logs a failed listen, and we silence its logs:
		// try the address first so a taken port is a clear, quick error.
		addr := net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("natsserver: NATS server cannot listen on %s: %w", addr, err)
		}
		l.Close()
	}
	so := &server.Options{
		Host:   opts.Host,
		Port:   opts.Port,
		NoLog:  true,
		NoSigs: true,
	}
	if err := opts.auth(so); err != nil {
		return nil, err
	}
	srv, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("natsserver: NATS server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(opts.ReadyTimeout) {
		srv.Shutdown()
		return nil, fmt.Errorf("natsserver: NATS server on %s:%d not ready after %s", opts.Host, opts.Port, opts.ReadyTimeout)
	}
	addr, ok := srv.Addr().(*net.TCPAddr)
	if !ok {
		srv.Shutdown()
		return nil, errors.New("natsserver: NATS server has no TCP address")
	}
	host := opts.Host
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		// Listening everywhere; clients on this machine dial loopback.
		host = "127.0.0.1"
	}
	scheme := "nats"
	if opts.TLS != nil {
		scheme = "tls"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(addr.Port))}
	return &Server{srv: srv, url: u.String()}, nil
}

// ClientURL returns the URL clients dial, such as nats://127.0.0.1:4222
// (tls://… with Options.TLS). It holds no credentials.
func (s *Server) ClientURL() string { return s.url }

// InProcessConn returns a connection to the server that bypasses TCP; it
// makes s a nats.InProcessConnProvider, for nats.InProcessServer(s).
func (s *Server) InProcessConn() (net.Conn, error) { return s.srv.InProcessConn() }

// Server returns the underlying nats-server, for inspection.
func (s *Server) Server() *server.Server { return s.srv }

// Shutdown stops the server, disconnects its clients and waits until it
// has stopped. It is idempotent.
func (s *Server) Shutdown() {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}
