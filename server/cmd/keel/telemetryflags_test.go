package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
)

// keel dev's default metrics address, when taken, costs the metrics and
// a warning, not the stack; an address given with the flag must work.
func TestMetricsAddressInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().String()
	ctx := context.Background()

	var f telemetryFlags
	fs := newFlagSet("dev", "keel dev", "")
	f.register(fs, taken)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	tel, err := f.start(ctx, &stderr, "dev")
	if err != nil {
		t.Fatalf("default address taken: %v", err)
	}
	defer tel.Shutdown(ctx)
	if tel.MetricsURL() != "" || !strings.Contains(stderr.String(), taken+" is in use") {
		t.Errorf("want no metrics and a warning, got %q and %q", tel.MetricsURL(), stderr.String())
	}
	if m, _ := telemetryNote(tel); !strings.Contains(m, "off") {
		t.Errorf("note %q", m)
	}

	var g telemetryFlags
	fs = newFlagSet("dev", "keel dev", "")
	g.register(fs, taken)
	if err := fs.Parse([]string{"--metrics-address", taken}); err != nil {
		t.Fatal(err)
	}
	if tel, err := g.start(ctx, &stderr, "dev"); err == nil {
		tel.Shutdown(ctx)
		t.Fatal("an explicit address in use was accepted")
	}

	var h telemetryFlags
	fs = newFlagSet("worker", "keel worker", "")
	h.register(fs, "")
	if err := fs.Parse([]string{"--metrics-address", "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	tel, err = h.start(ctx, &stderr, "worker")
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(ctx)
	if m, _ := telemetryNote(tel); !strings.HasPrefix(m, "http://127.0.0.1:") || !strings.HasSuffix(m, "/metrics") {
		t.Errorf("metrics URL %q", m)
	}
}
