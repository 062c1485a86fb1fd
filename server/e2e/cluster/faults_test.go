package cluster_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/store"
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

	// The test's client reads large values from the workers' store,
	// through the same cut the workers go through.
	for _, kv := range top.storeEnv {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	st, err := store.Open(ctx, top.storeURL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, client.Options{HostPort: top.frontend,
		DataConverter: store.NewDataConverter(store.NewCodec(st, store.CodecOptions{})),
		Live:          keeltest.DialNATS(t, top.natsURL, live.NATSOptions{}),
		Config:        api.RunConfig{HeartbeatAfter: keel.Duration(runHeartbeat)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var results []result
	batch := func(name string, at phase, fault func()) {
		t.Helper()
		b := runBatch(t, ctx, top, c, name, at, fault)
		r := checkBatch(t, ctx, c, top, b)
		results = append(results, r)
		t.Logf("%s: %d runs in flight at the fault, completed p50 %v p99 %v; failures: %v", name, r.affected,
			r.doneP50.Round(time.Millisecond), r.doneP99.Round(time.Millisecond), r.failures)
		top.check(t)
	}
	batch("baseline", duringTools, nil)
	t.Logf("workload results (%v in all):\n%s", time.Since(start).Round(time.Second), table(results))
}
