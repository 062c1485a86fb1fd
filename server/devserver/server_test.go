package devserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap/zapcore"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/testlog"
)

// Tests here never run in parallel: TestInMemoryServer checks that no
// server goroutine is left once every server is stopped.

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestInMemoryServer(t *testing.T) {
	ctx := testContext(t)
	s := StartForTest(t, Config{})
	require.Equal(t, DefaultNamespace, s.Namespace())
	require.Empty(t, s.UIAddress())
	require.NotEqual(t, "127.0.0.1:7233", s.Address(), "AnyPort must not fall back to the default port")
	c, err := s.Dial(ctx, client.Options{})
	require.NoError(t, err)

	t.Run("namespace retention", func(t *testing.T) {
		ns, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.Namespace()})
		require.NoError(t, err)
		require.Equal(t, 30*24*time.Hour, ns.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration())
	})

	t.Run("search attributes registered", func(t *testing.T) {
		resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.Namespace()})
		require.NoError(t, err)
		for _, key := range SearchAttributes {
			require.Equal(t, key.GetValueType(), resp.GetCustomAttributes()[key.GetName()], key.GetName())
		}
	})

	t.Run("search attributes listable", func(t *testing.T) {
		requireListableBySearchAttributes(t, ctx, c)
	})

	c.Close()
	require.NoError(t, s.Stop())
	require.NoError(t, s.Stop(), "Stop must be idempotent")
	_, err = net.DialTimeout("tcp", s.Address(), time.Second)
	require.Error(t, err, "the frontend still accepts connections after Stop")

	// Start(s.Config()) binds the same port again: Stop released it.
	again, err := Start(ctx, s.Config())
	require.NoError(t, err)
	require.Equal(t, s.Address(), again.Address())
	require.NoError(t, again.Stop())

	requireNoServerGoroutines(t)
}

// requireListableBySearchAttributes upserts keel's search attributes from a
// workflow, as keel's workflows do, and finds it with a visibility query on
// all of them.
func requireListableBySearchAttributes(t *testing.T, ctx context.Context, c client.Client) {
	tq := uniqueName("sa")
	w := worker.New(c, tq, worker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
		return workflow.UpsertTypedSearchAttributes(ctx,
			api.AttrSessionID.ValueSet("session-1"),
			api.AttrState.ValueSet("running"),
			api.AttrRunNumber.ValueSet(3),
			api.AttrModel.ValueSet("scripted:demo.json"),
		)
	}, workflow.RegisterOptions{Name: "upsert"})
	require.NoError(t, w.Start())
	defer w.Stop()
	id := uniqueName("sa")
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: tq}, "upsert")
	require.NoError(t, err)
	require.NoError(t, run.Get(ctx, nil))

	list := func(query string) []string {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		require.NoError(t, err)
		var ids []string
		for _, e := range resp.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		return ids
	}
	// Visibility is written asynchronously after the workflow closes, so
	// poll until the record shows up.
	query := `KeelSessionID = "session-1" AND KeelState = "running" AND KeelRunNumber = 3 AND KeelModel = "scripted:demo.json"`
	require.Eventually(t, func() bool {
		ids := list(query)
		return len(ids) == 1 && ids[0] == id
	}, 10*time.Second, 20*time.Millisecond)
	require.Empty(t, list(`KeelSessionID = "session-2"`))
}

// requireNoServerGoroutines waits for every goroutine running Temporal
// server code or an SDK worker to end, and fails if one is still there
// after a while: a stopped server must not keep working (or, once another
// server binds its port, work against that one).
func requireNoServerGoroutines(t *testing.T) {
	t.Helper()
	var stuck []string
	deadline := time.Now().Add(15 * time.Second)
	for {
		stuck = serverGoroutines()
		if len(stuck) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		runtime.Gosched()
		time.Sleep(50 * time.Millisecond) // goroutines end on their own; nothing to wait on
	}
	t.Fatalf("%d goroutines still run server code after Stop; first:\n%s", len(stuck), stuck[0])
}

// lateMatchingPartition reports whether goroutine g belongs to a task
// queue partition of Temporal's matching service and to nothing else
// (its frames are matching's, or the server's common helpers it calls:
// backoff, goro). The matching engine's Stop unloads the partitions it
// holds when it is called; a partition that a request loads while the
// server shuts down is never unloaded, and its backlog and user-data
// goroutines wait on a context no one cancels (go.temporal.io/server
// v1.32.2, service/matching). That leak is upstream and rare; every other
// server goroutine must still end.
func lateMatchingPartition(g string) bool {
	matching := false
	for line := range strings.SplitSeq(g, "\n") {
		switch {
		case !strings.HasPrefix(line, "go.temporal.io/"):
		case strings.HasPrefix(line, "go.temporal.io/server/service/matching."):
			matching = true
		case strings.HasPrefix(line, "go.temporal.io/server/common/"):
		default:
			return false
		}
	}
	return matching
}

func serverGoroutines() []string {
	buf := make([]byte, 1<<24)
	buf = buf[:runtime.Stack(buf, true)]
	var found []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		for line := range strings.SplitSeq(g, "\n") {
			if strings.HasPrefix(line, "created by") {
				continue
			}
			if strings.HasPrefix(line, "go.temporal.io/server/") || strings.HasPrefix(line, "go.temporal.io/sdk/internal.(*baseWorker)") {
				if !lateMatchingPartition(g) {
					found = append(found, g)
				}
				break
			}
		}
	}
	return found
}

func TestRestartKeepsWorkflows(t *testing.T) {
	ctx := testContext(t)
	dir := t.TempDir()
	first := StartForTest(t, Config{DataDir: dir})
	_, err := os.Stat(filepath.Join(dir, DatabaseFile))
	require.NoError(t, err)
	_, err = Start(ctx, Config{DataDir: dir, Port: AnyPort, DisableUI: true, Logger: testlog.New(t)})
	require.ErrorIs(t, err, ErrDataDirInUse, "two servers on one database")

	// One client and one worker across the restart, as a keel worker that
	// outlives `keel dev` would be.
	c, err := first.Dial(ctx, client.Options{})
	require.NoError(t, err)
	defer c.Close()
	tq := uniqueName("restart")
	w := worker.New(c, tq, worker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context) (string, error) {
		var s string
		workflow.GetSignalChannel(ctx, "go").Receive(ctx, &s)
		return "got " + s, nil
	}, workflow.RegisterOptions{Name: "wait-for-signal"})
	require.NoError(t, w.Start())
	defer w.Stop()

	id := uniqueName("restart")
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: tq}, "wait-for-signal")
	require.NoError(t, err)
	waitForEvent(t, ctx, c, id, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) // now blocked on the signal

	require.NoError(t, first.Stop())
	cfg := first.Config()
	cfg.Retention = 45 * 24 * time.Hour // a changed setting is applied to the existing namespace
	second := StartForTest(t, cfg)
	require.Equal(t, first.Address(), second.Address())

	require.NoError(t, c.SignalWorkflow(ctx, id, "", "go", "hello"))
	var result string
	require.NoError(t, run.Get(ctx, &result))
	require.Equal(t, "got hello", result)

	ns, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: second.Namespace()})
	require.NoError(t, err)
	require.Equal(t, 45*24*time.Hour, ns.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration())
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: second.Namespace()})
	require.NoError(t, err)
	require.Len(t, resp.GetCustomAttributes(), len(SearchAttributes), "a restart must not register search attributes twice")
}

// waitForEvent long-polls a workflow's history until an event of type
// appears.
func waitForEvent(t *testing.T, ctx context.Context, c client.Client, id string, want enumspb.EventType) {
	t.Helper()
	events := c.GetWorkflowHistory(ctx, id, "", true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for events.HasNext() {
		e, err := events.Next()
		require.NoError(t, err)
		if e.GetEventType() == want {
			return
		}
	}
	t.Fatalf("history of %s ended without %v", id, want)
}

func TestPortInUse(t *testing.T) {
	ctx := testContext(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port

	_, err = Start(ctx, Config{Port: port, DisableUI: true, Logger: testlog.New(t)})
	require.ErrorIs(t, err, ErrPortInUse)
	_, err = Start(ctx, Config{Port: AnyPort, UIPort: port, Logger: testlog.New(t)})
	require.ErrorIs(t, err, ErrPortInUse)
}

func TestConfigDefaults(t *testing.T) {
	got, err := Config{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, DefaultIP, got.IP)
	require.Equal(t, DefaultPort, got.Port)
	require.Equal(t, DefaultUIPort, got.UIPort)
	require.Equal(t, DefaultNamespace, got.Namespace)
	require.Equal(t, DefaultRetention, got.Retention)
	require.NotNil(t, got.Logger)
	require.Equal(t, zapcore.WarnLevel, got.LogLevel)

	got, err = Config{Port: AnyPort, UIPort: 9000, DataDir: "rel", Retention: time.Hour}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, AnyPort, got.Port)
	require.Equal(t, 9000, got.UIPort)
	require.True(t, filepath.IsAbs(got.DataDir))
	require.Equal(t, time.Hour, got.Retention, "an explicit short retention is kept")

	for _, bad := range []Config{{Port: -2}, {UIPort: 70000}, {IP: "localhost"}, {Retention: -time.Hour}} {
		_, err := bad.withDefaults()
		require.Error(t, err, "%+v", bad)
	}
}

func TestStartHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Start(ctx, Config{Port: AnyPort, DisableUI: true, Logger: testlog.New(t)})
	require.ErrorIs(t, err, context.Canceled)
}

// uniqueName returns prefix with a random suffix, for task queues and
// workflow IDs that no other test uses.
func uniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

func TestLateMatchingPartitionIsNarrow(t *testing.T) {
	// A stack a clean-clone CI run left after Stop: a partition's user-data
	// fetch, loaded while matching shut down.
	fetch := `goroutine 7377 [select]:
go.temporal.io/server/common/backoff.ThrottleRetryContext({0xc6abf08, 0xc000e35c20}, 0xc0015c9f08, {0xc64e6c0, 0xc0034b2b40}, 0x0)
	/root/go/pkg/mod/go.temporal.io/server@v1.32.2/common/backoff/retry.go:90 +0x4c5
go.temporal.io/server/service/matching.(*userDataManagerImpl).fetchUserData(0xc0030d73b0, {0xc6abf40, 0xc00137bb30})
	/root/go/pkg/mod/go.temporal.io/server@v1.32.2/service/matching/user_data_manager.go:367 +0x2a5
go.temporal.io/server/common/goro.(*Group).Go.func1()
	/root/go/pkg/mod/go.temporal.io/server@v1.32.2/common/goro/group.go:32 +0x51
created by sync.(*WaitGroup).Go in goroutine 7376`
	require.True(t, lateMatchingPartition(fetch))
	history := strings.Replace(fetch, "service/matching.(*userDataManagerImpl).fetchUserData", "service/history.(*historyEngineImpl).Start", 1)
	require.False(t, lateMatchingPartition(history), "a history goroutine is a leak")
	common := `goroutine 1 [select]:
go.temporal.io/server/common/goro.(*Group).Go.func1()
	/root/go/pkg/mod/go.temporal.io/server@v1.32.2/common/goro/group.go:32 +0x51`
	require.False(t, lateMatchingPartition(common), "common helpers alone name no partition")
}
