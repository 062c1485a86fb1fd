package cluster_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
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
// sets it to 1): it takes minutes and a PostgreSQL it may restart. A
// list of words runs only the faults whose names hold one.
const EnvClusterFaults = "KEEL_CLUSTER_FAULTS"

// EnvPostgresRestart is a shell command that restarts the PostgreSQL
// server of KEEL_POSTGRES_DSN (.ci/run: pg_ctlcluster VERSION NAME
// restart); without it that fault is left out.
const EnvPostgresRestart = "KEEL_POSTGRES_RESTART"

// How long faults last: a Temporal service is down for serviceDown before
// it is started again; a cut, NATS or the store for outage. Holding a
// fault is the one place the test sleeps (besides a client's pause before
// it retries a send or a follow, as a real client backs off).
const (
	serviceDown = 10 * time.Second
	outage      = 30 * time.Second
)

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
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
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
	// KEEL_CLUSTER_FAULTS names faults to run (a word of their names,
	// comma-separated: "NATS,history"); "1" runs them all. The baseline
	// always runs.
	only := os.Getenv(EnvClusterFaults)
	batch := func(name string, at phase, fault func()) {
		t.Helper()
		if fault != nil && only != "1" && !slices.ContainsFunc(strings.Split(only, ","), func(w string) bool {
			return strings.Contains(name, w)
		}) {
			return
		}
		b := runBatch(t, ctx, top, c, name, at, fault)
		r := checkBatch(t, ctx, c, top, b)
		results = append(results, r)
		t.Logf("%s: %d runs in flight at the fault, completed p50 %v p99 %v, run time p50 %v p99 %v; failures: %v", name, r.affected,
			r.doneP50.Round(time.Millisecond), r.doneP99.Round(time.Millisecond),
			r.runP50.Round(time.Millisecond), r.runP99.Round(time.Millisecond), r.failures)
		top.check(t)
	}
	batch("baseline", duringTools, nil)
	// A worker killed with SIGKILL, started again at once as a supervisor
	// would: its turns and tools are retried on the others once their
	// heartbeats are missed.
	batch("kill -9 keel worker (turns)", duringTurns, func() { top.workers[0].kill(); top.workers[0].restart(t) })
	batch("kill -9 keel worker (tools)", duringTools, func() { top.workers[1].kill(); top.workers[1].restart(t) })
	for _, service := range []string{"history", "matching", "frontend"} {
		batch("kill -9 temporal "+service+", back after 10 s", duringTools, func() {
			top.temporal[service].kill()
			time.Sleep(serviceDown)
			top.temporal[service].restart(t)
		})
	}
	batch("keel worker cut off from the frontend 30 s", duringTools, func() {
		top.workerCut.setCut(true)
		time.Sleep(outage)
		top.workerCut.setCut(false)
	})
	batch("NATS down 30 s", duringTurns, func() {
		top.nats.kill()
		time.Sleep(outage)
		top.nats.restart(t)
	})
	batch("content store unreachable 30 s", duringTools, func() {
		top.storeCut.setCut(true)
		time.Sleep(outage)
		top.storeCut.setCut(false)
	})
	if restart := os.Getenv(EnvPostgresRestart); restart != "" {
		batch("PostgreSQL restarted", duringTools, func() {
			if out, err := exec.Command("sh", "-c", restart).CombinedOutput(); err != nil {
				t.Errorf("restart PostgreSQL (%s): %v\n%s", restart, err, out)
			}
		})
	} else {
		t.Logf("no %s: PostgreSQL is not restarted", EnvPostgresRestart)
	}
	t.Logf("workload results (%v in all):\n%s", time.Since(start).Round(time.Second), table(results))
}
