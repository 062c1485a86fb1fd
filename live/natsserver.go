package live

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Defaults of NATSServerOptions.
const (
	DefaultNATSHost         = "127.0.0.1"
	DefaultNATSPort         = 4222
	DefaultNATSReadyTimeout = 5 * time.Second
	// RandomPort asks for any free port; tests use it.
	RandomPort = -1
)

// NATSServerOptions configure an embedded NATS server. Every field is
// optional.
type NATSServerOptions struct {
	// Host is the address to listen on. Default DefaultNATSHost
	// (127.0.0.1): `keel dev` is local unless asked otherwise; use "0.0.0.0"
	// to accept other machines.
	Host string
	// Port to listen on. 0 means DefaultNATSPort (4222, NATS's own
	// default); RandomPort (-1) picks a free one.
	Port int
	// ReadyTimeout bounds the wait for the server to accept connections.
	// Default DefaultNATSReadyTimeout.
	ReadyTimeout time.Duration
}

// NATSServer is an in-process NATS server, for `keel dev` and tests. It logs
// nothing and ignores signals: its host process owns both.
type NATSServer struct {
	srv *server.Server
	url string
}

// StartNATSServer starts an embedded NATS server and returns once it
// accepts connections.
func StartNATSServer(opts NATSServerOptions) (*NATSServer, error) {
	if opts.Host == "" {
		opts.Host = DefaultNATSHost
	}
	if opts.Port == 0 {
		opts.Port = DefaultNATSPort
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultNATSReadyTimeout
	}
	if opts.Port != RandomPort {
		// The server only logs a failed listen, and we silence its logs:
		// try the address first so a taken port is a clear, quick error.
		addr := net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("live: NATS server cannot listen on %s: %w", addr, err)
		}
		l.Close()
	}
	srv, err := server.NewServer(&server.Options{
		Host:   opts.Host,
		Port:   opts.Port,
		NoLog:  true,
		NoSigs: true,
	})
	if err != nil {
		return nil, fmt.Errorf("live: NATS server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(opts.ReadyTimeout) {
		srv.Shutdown()
		return nil, fmt.Errorf("live: NATS server on %s:%d not ready after %s", opts.Host, opts.Port, opts.ReadyTimeout)
	}
	addr, ok := srv.Addr().(*net.TCPAddr)
	if !ok {
		srv.Shutdown()
		return nil, errors.New("live: NATS server has no TCP address")
	}
	host := opts.Host
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		// Listening everywhere; clients on this machine dial loopback.
		host = "127.0.0.1"
	}
	u := url.URL{Scheme: "nats", Host: net.JoinHostPort(host, strconv.Itoa(addr.Port))}
	return &NATSServer{srv: srv, url: u.String()}, nil
}

// ClientURL returns the URL clients dial, such as nats://127.0.0.1:4222.
func (s *NATSServer) ClientURL() string { return s.url }

// InProcessConn returns a connection to the server that bypasses TCP; it
// makes s a nats.InProcessConnProvider, for nats.InProcessServer(s).
func (s *NATSServer) InProcessConn() (net.Conn, error) { return s.srv.InProcessConn() }

// Server returns the underlying nats-server, for inspection.
func (s *NATSServer) Server() *server.Server { return s.srv }

// Shutdown stops the server, disconnects its clients and waits until it
// has stopped. It is idempotent.
func (s *NATSServer) Shutdown() {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}
