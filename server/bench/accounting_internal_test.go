package bench

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	tokenspb "go.temporal.io/server/api/token/v1"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/tasktoken"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"

	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

func TestServerCountersCountByName(t *testing.T) {
	var c ServerCounters
	before := c.Snapshot()

	icpt := c.Interceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/temporal.api.workflowservice.v1.WorkflowService/PollActivityTaskQueue"}
	for _, token := range [][]byte{nil, []byte("t")} {
		_, err := icpt(context.Background(), nil, info, func(context.Context, any) (any, error) {
			return &workflowservice.PollActivityTaskQueueResponse{TaskToken: token}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	token, err := tasktoken.NewSerializer().Serialize(&tokenspb.Task{ActivityType: "ModelTurn"})
	if err != nil {
		t.Fatal(err)
	}
	hb := &grpc.UnaryServerInfo{FullMethod: "/temporal.api.workflowservice.v1.WorkflowService/RecordActivityTaskHeartbeat"}
	for _, req := range []any{
		&workflowservice.RecordActivityTaskHeartbeatRequest{TaskToken: token},
		&workflowservice.RecordActivityTaskHeartbeatRequest{TaskToken: []byte("garbage")},
	} {
		if _, err := icpt(context.Background(), req, hb, func(context.Context, any) (any, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
	}

	h := c.MetricsHandler().WithTags(metrics.OperationTag("UpdateWorkflowExecution"), metrics.NamespaceTag("ns"))
	metrics.PersistenceRequests.With(h).Record(1)
	metrics.PersistenceLatency.With(h).Record(time.Millisecond)
	metrics.PersistenceRequests.With(c.MetricsHandler()).Record(2, metrics.OperationTag("GetWorkflowExecution"))
	c.MetricsHandler().Counter(visibilityPersistenceRequests).Record(1, metrics.OperationTag("UpsertWorkflowExecution"))
	c.MetricsHandler().Counter("service_requests").Record(5, metrics.OperationTag("Poll"))
	// Actions as the frontend's telemetry interceptor records them: on a
	// handler tagged with the call's namespace. The system namespace's are
	// the server's own.
	for _, ns := range []string{"default", "temporal-system"} {
		h := c.MetricsHandler().WithTags(metrics.OperationTag("StartWorkflowExecution"), metrics.NamespaceTag(ns))
		metrics.ActionCounter.With(h).Record(1, metrics.ActionType("grpc_StartWorkflowExecution"))
	}

	log := c.Logger(nil)
	log.Warn("Slow gRPC call")
	log.Warn("Slow gRPC call", zap.String("method", "x"))
	log.Info("chatty")

	got := c.Snapshot().Sub(before)
	want := ServerSnapshot{
		RPCs:        Counts{"PollActivityTaskQueue": 2, "PollActivityTaskQueue (task)": 1, "RecordActivityTaskHeartbeat": 2},
		Heartbeats:  Counts{"ModelTurn": 1, "unknown": 1},
		Persistence: Counts{"UpdateWorkflowExecution": 1, "GetWorkflowExecution": 2, "visibility UpsertWorkflowExecution": 1},
		Actions:     Counts{"grpc_StartWorkflowExecution": 1},
		Warnings:    Counts{"Slow gRPC call": 2},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("counts (-want +got):\n%s", d)
	}
	if w := got.Persistence.Matching(PersistenceWrite); w != 2 {
		t.Errorf("writes = %d, want 2 (the update and the visibility upsert)", w)
	}
}

// TestServerCountsBillableActions runs one bare baseline workflow and one
// shaped session, as the concurrency benchmark does, on a server whose
// own action counter ServerCounters reads, and checks the bill against
// the rules of the server's telemetry interceptor: the bare workflow pays
// for its start and for each activity it schedules (stream, tool,
// stream), not for its workflow tasks, activity polls or the client's
// long polls for the result; the shaped session pays for the same
// activities, the update-with-start, the update's acceptance, and twice
// for its child. The server counts a call's actions before it answers the
// call, so each is counted once the run that made it ended.
func TestServerCountsBillableActions(t *testing.T) {
	var c ServerCounters
	srv := keeltest.StartServer(t, devserver.Config{MetricsHandler: c.MetricsHandler()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tc, err := srv.Dial(ctx, sdkclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	w := NewBaselineWorker(tc)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	s := &stack{tc: tc}
	in := BaselineInput{Chunks: []int{1, 1}, Delay: time.Millisecond}
	const scheduled = "command_ScheduleActivityTask"

	before := c.Snapshot()
	if r := s.baselineSession(ctx, "bare", in, false); r.err != nil {
		t.Fatal(r.err)
	}
	want := Counts{"grpc_StartWorkflowExecution": 1, scheduled: 3}
	if d := cmp.Diff(want, c.Snapshot().Sub(before).Actions); d != "" {
		t.Errorf("a bare run's billable actions (-want +got):\n%s", d)
	}

	before = c.Snapshot()
	if r := s.shapedSession(ctx, "shaped", in, false); r.err != nil {
		t.Fatal(r.err)
	}
	want = Counts{"grpc_ExecuteMultiOperation": 1, "message_UpdateWorkflowExecution:Acceptance": 1,
		"command_StartChildWorkflowExecution": 1, "command_StartChildWorkflowExecution_Extra": 1,
		scheduled: 3}
	if d := cmp.Diff(want, c.Snapshot().Sub(before).Actions); d != "" {
		t.Errorf("a shaped run's billable actions (-want +got):\n%s", d)
	}
}

func TestWarningCounterPassesRecordsOn(t *testing.T) {
	var c ServerCounters
	core, logs := observer.New(zapcore.DebugLevel)
	log := c.Logger(zap.New(core)).With(zap.String("component", "temporal"))
	log.Warn("a")
	log.Error("b")
	log.Info("c")
	var seen []string
	for _, e := range logs.AllUntimed() {
		seen = append(seen, e.Message+" "+e.ContextMap()["component"].(string))
	}
	if d := cmp.Diff([]string{"a temporal", "b temporal"}, seen); d != "" {
		t.Errorf("passed on (-want +got):\n%s", d)
	}
}

func TestParseStatCPU(t *testing.T) {
	// Fields 14 and 15 are 250 and 50 ticks; the name holds a space and a
	// parenthesis.
	stat := "4242 (keel (x) w) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 12 0 100 0 0"
	got, err := parseStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if got != 3*time.Second {
		t.Errorf("CPU = %v, want 3s", got)
	}
	if _, err := ProcessCPU(0); err != nil {
		t.Logf("no /proc here: %v", err)
	}
}

func TestCancelledSessionsAreSpread(t *testing.T) {
	for _, tc := range []struct {
		n    int
		frac float64
		want []int
	}{
		{1, 0.1, nil},
		{10, 0.1, []int{9}},
		{20, 0.1, []int{9, 19}},
		{10, 0.3, []int{3, 6, 9}},
	} {
		var got []int
		c := cancels(tc.n, tc.frac)
		for i := range tc.n {
			if cancelled(i, tc.n, c) {
				got = append(got, i)
			}
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("n=%d fraction=%v: cancelled (-want +got):\n%s", tc.n, tc.frac, d)
		}
	}
}
