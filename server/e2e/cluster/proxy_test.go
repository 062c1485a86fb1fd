package cluster_test

import (
	"io"
	"net"
	"sync"
	"testing"
)

// cutProxy forwards TCP from its own address to target until cut. It
// stands between one keel worker and the frontend, so the test can cut
// that worker off alone. It is small and written here rather than taken
// from a library (toxiproxy) because the test needs one behaviour only,
// and this machine has no network to fetch a new dependency.
//
// Cut models a partition as the worker sees it: its open connections are
// reset, and new ones are accepted but never answered (a black hole, like
// SYNs dropped at a firewall), so gRPC's dials and keepalives time out
// rather than fail fast. Heal drops the held connections and forwards
// again.
type cutProxy struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	held  []net.Conn
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{l: l, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() {
		_ = l.Close()
		p.setCut(false)
		p.closeAll()
	})
	go p.serve()
	return p
}

func (p *cutProxy) addr() string { return p.l.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.held = append(p.held, c)
			p.mu.Unlock()
			continue
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		go p.forward(c)
	}
}

func (p *cutProxy) forward(c net.Conn) {
	defer p.drop(c)
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		_ = up.Close()
		return
	}
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	defer p.drop(up)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

func (p *cutProxy) drop(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// setCut cuts the worker off (true) or heals the cut (false).
func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	p.cut = cut
	held := p.held
	p.held = nil
	p.mu.Unlock()
	if cut {
		p.closeAll()
	}
	for _, c := range held {
		_ = c.Close()
	}
}

func (p *cutProxy) closeAll() {
	p.mu.Lock()
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}
