package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"syscall"

	"github.com/keelrun/keel/server/telemetry"
)

// defaultDevMetricsAddress is where `keel dev` serves Prometheus metrics:
// the port OpenTelemetry's Prometheus exporters use by convention.
const defaultDevMetricsAddress = "127.0.0.1:9464"

// telemetryFlags is --metrics-address, of `keel dev` and `keel worker`.
// Traces need no flag: the OTEL_EXPORTER_OTLP_* variables turn them on.
type telemetryFlags struct {
	fs             *flagSet
	metricsAddress string
	def            string
	// hosts are the --allowed-host names the metrics endpoint answers to;
	// nil: none.
	hosts *hostsFlag
}

func (t *telemetryFlags) register(fs *flagSet, def string) {
	t.fs, t.def = fs, def
	usage := "`HOST:PORT` to serve Prometheus metrics on, at /metrics (port 0 picks a free one; \"\" serves none)"
	if def == "" {
		usage = "`HOST:PORT` to serve Prometheus metrics on, at /metrics (port 0 picks a free one; default: none)"
	}
	fs.StringVar(&t.metricsAddress, "metrics-address", def, usage)
}

// set reports whether --metrics-address was given.
func (t *telemetryFlags) set() bool {
	given := false
	t.fs.Visit(func(f *flag.Flag) { given = given || f.Name == "metrics-address" })
	return given
}

// start turns metrics and traces on. When the default address of
// `keel dev` is taken (another keel dev, say), it warns on stderr and goes
// on without metrics; an address given with the flag must work.
func (t *telemetryFlags) start(ctx context.Context, stderr io.Writer, cmd string) (*telemetry.Telemetry, error) {
	opts := telemetry.Options{MetricsAddress: t.metricsAddress}
	if t.hosts != nil {
		opts.MetricsAllowedHosts = t.hosts.items
	}
	tel, err := telemetry.Start(ctx, opts)
	if err != nil && t.metricsAddress == t.def && !t.set() && errors.Is(err, syscall.EADDRINUSE) {
		fmt.Fprintf(stderr, "keel %s: warning: %s is in use; no metrics (choose another --metrics-address)\n", cmd, t.def)
		tel, err = telemetry.Start(ctx, telemetry.Options{})
	}
	if err != nil {
		return nil, err
	}
	return tel, nil
}

// telemetryNote describes where metrics and traces go, for banners.
func telemetryNote(tel *telemetry.Telemetry) (metrics, traces string) {
	metrics = tel.MetricsURL()
	if metrics == "" {
		metrics = "off (--metrics-address)"
	}
	traces = tel.Tracing()
	if traces == "off" {
		traces = "off (set OTEL_EXPORTER_OTLP_ENDPOINT)"
	}
	return metrics, traces
}
