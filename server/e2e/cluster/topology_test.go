package cluster_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// EnvClusterNode names a clusternode binary the test runs instead of
// building one.
const EnvClusterNode = "KEEL_CLUSTERNODE_BIN"

// historyShards of the cluster's history service: several, so shards are
// owned, lost and taken back by a history process as in production.
const historyShards = 4

// temporalServices are started in this order, each in its own process:
// history first (it brings the database schema up), the frontend before
// the worker service, which dials it.
var temporalServices = []string{"history", "matching", "frontend", "worker"}

// topology is keel as deployed on several machines, on this one: each
// Temporal service, each keel worker and gateway, NATS and the content
// store in a process of its own (docs/operations.md, "A cluster").
type topology struct {
	dir      string
	temporal map[string]*node
	frontend string // the frontend's host:port
	nats     *node
	natsURL  string
	s3       *node
	// storeCut stands between every keel process and the store, so the
	// store can be made unreachable without losing what it holds.
	storeCut *cutProxy
	storeURL string
	// workerCut stands between workers[cutWorker] and the frontend.
	workerCut *cutProxy
	workers   []*node
	gateways  []*node
	apiURLs   []string // each gateway's HTTP API root
	effects   *effects
	scripts   string
	storeEnv  []string
	keelBin   string // for the workload's `keel run` clients
}

// cutWorker is the worker that reaches the frontend through workerCut.
const cutWorker = 2

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// freeMembershipPort returns a free port below 32768: Temporal keeps a
// member's RPC port in a smallint column (cluster_membership.rpc_port on
// PostgreSQL), which the ephemeral ports the system hands out overflow.
func freeMembershipPort(t *testing.T) int {
	t.Helper()
	for range 100 {
		port := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			_ = l.Close()
			return port
		}
	}
	t.Fatal("no free port below 32768")
	return 0
}

// clusterNodeBinary returns $KEEL_CLUSTERNODE_BIN or builds clusternode.
func clusterNodeBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv(EnvClusterNode); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "clusternode")
	build := exec.Command("go", "build", "-o", bin, "github.com/keelrun/keel/server/e2e/cluster/clusternode")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build clusternode: %v\n%s", err, out)
	}
	return bin
}

// startTopology starts the whole cluster on pg's databases.
func startTopology(t *testing.T, pg *devserver.Postgres) *topology {
	t.Helper()
	keelBin, nodeBin := keeltest.KeelBinary(t), clusterNodeBinary(t)
	top := &topology{dir: t.TempDir(), temporal: map[string]*node{}, keelBin: keelBin}

	ports := map[string]devserver.ServicePorts{}
	for _, s := range temporalServices {
		ports[s] = devserver.ServicePorts{GRPC: freeMembershipPort(t), Membership: freeMembershipPort(t)}
	}
	portsJSON, _ := json.Marshal(ports)
	pgURL := (&url.URL{Scheme: "postgres", User: url.UserPassword(pg.User, pg.Password), Host: pg.Address,
		Path: "/" + pg.Database, RawQuery: url.Values{"sslmode": {"disable"}}.Encode()}).String()
	for _, s := range temporalServices {
		top.temporal[s] = startNode(t, "temporal "+s, "ready", nil, nodeBin, "temporal",
			"-services", s, "-postgres", pgURL, "-ports", string(portsJSON), "-shards", strconv.Itoa(historyShards))
	}
	top.frontend = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports["frontend"].GRPC))

	natsPort := freePort(t)
	top.nats = startNode(t, "nats", "ready", nil, nodeBin, "nats", "-port", strconv.Itoa(natsPort))
	top.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", natsPort)

	s3Port := freePort(t)
	top.s3 = startNode(t, "s3", "ready", nil, nodeBin, "s3", "-port", strconv.Itoa(s3Port))
	top.storeCut = startCutProxy(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(s3Port)))
	q := url.Values{"endpoint": {"http://" + top.storeCut.addr()}, "region": {"us-east-1"}, "use_path_style": {"true"}}
	top.storeURL = "s3://keel?" + q.Encode()
	none := filepath.Join(top.dir, "none")
	top.storeEnv = []string{"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_SESSION_TOKEN=",
		"AWS_PROFILE=", "AWS_CONFIG_FILE=" + none, "AWS_SHARED_CREDENTIALS_FILE=" + none, "AWS_EC2_METADATA_DISABLED=true"}

	var effectsURL string
	top.effects, effectsURL = serveEffects(t)
	top.scripts = filepath.Join(top.dir, "scripts")
	if err := os.Mkdir(top.scripts, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(top.dir, "keel.yaml")
	yaml := fmt.Sprintf("tools: [sleep]\nmcp_servers:\n  effects:\n    url: %s\n    timeout: 1m\n", effectsURL)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}

	top.workerCut = startCutProxy(t, top.frontend)
	for i := range 3 {
		address := top.frontend
		if i == cutWorker {
			address = top.workerCut.addr()
		}
		top.workers = append(top.workers, startNode(t, fmt.Sprintf("keel worker %d", i), "polling task queue", top.storeEnv,
			keelBin, "worker", "--address", address, "--namespace", devserver.DefaultNamespace,
			"--nats", top.natsURL, "--store", top.storeURL, "--encryption-allow-plaintext",
			"--config", conf, "--workspace", filepath.Join(top.dir, fmt.Sprintf("workspace-%d", i)),
			"--scripts", top.scripts, "--stop-timeout", "1s"))
	}
	for i := range 2 {
		port := freePort(t)
		top.gateways = append(top.gateways, startNode(t, fmt.Sprintf("keel serve %d", i), "HTTP API", top.storeEnv,
			keelBin, "serve", "--address", top.frontend, "--namespace", devserver.DefaultNamespace,
			"--nats", top.natsURL, "--store", top.storeURL, "--http-port", strconv.Itoa(port)))
		top.apiURLs = append(top.apiURLs, fmt.Sprintf("http://127.0.0.1:%d/v1", port))
	}
	return top
}

// check reports every process of the topology that has exited.
func (top *topology) check(t *testing.T) {
	t.Helper()
	var all []*node
	for _, s := range temporalServices {
		all = append(all, top.temporal[s])
	}
	all = append(all, top.nats, top.s3)
	all = append(all, top.workers...)
	all = append(all, top.gateways...)
	for _, n := range all {
		if err := n.alive(); err != nil {
			t.Error(err)
		}
	}
}
