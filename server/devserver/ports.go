package devserver

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// freePort asks the operating system for a free TCP port on ip. The port is
// not reserved once this returns; Start retries with new ports if another
// process takes one first.
func freePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("devserver: choose a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// checkPortFree returns an error wrapping ErrPortInUse if ip:port cannot be
// bound, so that a busy fixed port is reported as an error rather than
// through the server's fatal log path.
func checkPortFree(ip string, port int) error {
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("%w: %s", ErrPortInUse, addr)
		}
		return fmt.Errorf("devserver: listen on %s: %w", addr, err)
	}
	return l.Close()
}

// dialableIP is the address a client in this process uses to reach a
// listener bound to ip: a wildcard bind is reached on loopback.
func dialableIP(ip string) string {
	parsed := net.ParseIP(ip)
	switch {
	case parsed == nil || !parsed.IsUnspecified():
		return ip
	case parsed.To4() != nil:
		return "127.0.0.1"
	default:
		return "::1"
	}
}
