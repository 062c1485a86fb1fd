package live_test

import (
	"net"
	"sync"
	"testing"
)

// proxy is a TCP relay between NATS clients and a server that a test can
// cut (drop every connection and refuse new ones until restored) or stall
// (stop reading what clients send, so their writes back up).
type proxy struct {
	l      net.Listener
	target string

	mu      sync.Mutex
	down    bool
	conns   map[net.Conn]struct{}
	stalled chan struct{} // non-nil while stalled; closed to release
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target, conns: make(map[net.Conn]struct{})}
	go p.accept()
	t.Cleanup(func() {
		l.Close()
		p.cut()
	})
	return p
}

func (p *proxy) url() string { return "nats://" + p.l.Addr().String() }

func (p *proxy) accept() {
	for {
		client, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			client.Close()
			continue
		}
		// A small, fixed receive buffer (no autotuning) makes a stalled
		// client back up after a known few megabytes.
		_ = client.(*net.TCPConn).SetReadBuffer(64 << 10)
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client, server) {
			continue
		}
		go p.relay(server, client, true)
		go p.relay(client, server, false)
	}
}

func (p *proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// relay copies src to dst; fromClient copies obey stall.
func (p *proxy) relay(dst, src net.Conn, fromClient bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		if fromClient {
			p.mu.Lock()
			gate := p.stalled
			p.mu.Unlock()
			if gate != nil {
				<-gate
			}
		}
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// cut closes every relayed connection and refuses new ones until restore.
func (p *proxy) cut() {
	p.mu.Lock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
	p.mu.Unlock()
}

func (p *proxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// stall stops reading from clients until unstall.
func (p *proxy) stall() {
	p.mu.Lock()
	if p.stalled == nil {
		p.stalled = make(chan struct{})
	}
	p.mu.Unlock()
}

func (p *proxy) unstall() {
	p.mu.Lock()
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
	p.mu.Unlock()
}
