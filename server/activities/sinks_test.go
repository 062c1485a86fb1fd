package activities_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/instrument"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/hook"
)

// fakeLog is a session's log: events 1..segmentLast in one content-store
// segment, the rest in memory, answered as the session's events query
// answers (a page of at most the query's limit, or the segment's
// reference for a cursor inside it).
type fakeLog struct {
	events      []keel.Envelope // 1..N
	segmentLast int64
	// gap, if set, drops the event of that sequence from every page.
	gap int64
}

func newFakeLog(n, segmentLast int64, text string) *fakeLog {
	l := &fakeLog{segmentLast: segmentLast}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for seq := int64(1); seq <= n; seq++ {
		env, err := keel.Seal(keel.SteeringAccepted{SteeringID: fmt.Sprint(seq), Text: text}, "s1", "s1/run-1", at)
		if err != nil {
			panic(err)
		}
		env.Seq = seq
		l.events = append(l.events, env)
	}
	return l
}

func (l *fakeLog) EventsPage(_ context.Context, sessionID string, q api.EventsQuery) (api.EventsPage, error) {
	if sessionID != "s1" {
		return api.EventsPage{}, errors.New("no such session")
	}
	if q.After < l.segmentLast {
		return api.EventsPage{Segment: &api.EventSegment{First: 1, Last: l.segmentLast, Key: "seg"}, Snapshot: q.Snapshot, More: true}, nil
	}
	var page api.EventsPage
	page.Snapshot = q.Snapshot
	for _, ev := range l.events[q.After:q.Snapshot] {
		if ev.Seq == l.gap {
			continue
		}
		if len(page.Events) == q.Limit {
			page.More = true
			break
		}
		page.Events = append(page.Events, ev)
	}
	return page, nil
}

func (l *fakeLog) Segment(_ context.Context, seg api.EventSegment) ([]keel.Envelope, error) {
	if seg.Key != "seg" {
		return nil, errors.New("no such segment")
	}
	return l.events[:l.segmentLast], nil
}

// batchSink records each Deliver call; failAt, if set, fails the call
// whose first event has that sequence.
type batchSink struct {
	mu      sync.Mutex
	batches [][]keel.Envelope
	failAt  int64
}

func (s *batchSink) Deliver(_ context.Context, sessionID string, events []keel.Envelope) error {
	if sessionID != "s1" {
		return errors.New("wrong session")
	}
	if events[0].Seq == s.failAt {
		return errors.New("sink down")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, events)
	return nil
}

// seqs lists the first and last sequence of each batch.
func (s *batchSink) seqs() [][2]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][2]int64
	for _, b := range s.batches {
		out = append(out, [2]int64{b[0].Seq, b[len(b)-1].Seq})
	}
	return out
}

// sinkMetrics counts what DeliverEvents records, by name and sink.
type sinkMetrics struct {
	mu     sync.Mutex
	counts map[string]int64
	timers map[string]int
}

type sinkHandler struct {
	m    *sinkMetrics
	sink string
}

func (h sinkHandler) WithTags(tags map[string]string) client.MetricsHandler {
	if s, ok := tags["sink"]; ok {
		h.sink = s
	}
	return h
}
func (h sinkHandler) Counter(name string) client.MetricsCounter { return sinkCounter{h, name} }
func (h sinkHandler) Gauge(string) client.MetricsGauge          { return client.MetricsNopHandler.Gauge("") }
func (h sinkHandler) Timer(name string) client.MetricsTimer     { return sinkTimer{h, name} }

type sinkCounter struct {
	h    sinkHandler
	name string
}

func (c sinkCounter) Inc(n int64) {
	c.h.m.mu.Lock()
	defer c.h.m.mu.Unlock()
	c.h.m.counts[c.name+"/"+c.h.sink] += n
}

type sinkTimer struct {
	h    sinkHandler
	name string
}

func (t sinkTimer) Record(time.Duration) {
	t.h.m.mu.Lock()
	defer t.h.m.mu.Unlock()
	t.h.m.timers[t.name+"/"+t.h.sink]++
}

// deliver runs DeliverEvents once for in, with heartbeat details resumed
// (or none: 0), and returns the error and the metrics it recorded.
func deliver(t *testing.T, acts *activities.Activities, in activities.DeliverEventsInput, resumed int64) (error, *sinkMetrics) {
	t.Helper()
	m := &sinkMetrics{counts: map[string]int64{}, timers: map[string]int{}}
	var suite testsuite.WorkflowTestSuite
	suite.SetMetricsHandler(sinkHandler{m: m})
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(acts.DeliverEvents, activity.RegisterOptions{Name: activities.DeliverEventsName})
	if resumed > 0 {
		env.SetHeartbeatDetails(resumed)
	}
	_, err := env.ExecuteActivity(activities.DeliverEventsName, in)
	return err, m
}

// DeliverEvents reads the span itself (a segment, then pages of the
// session's memory) and delivers it in order, in batches of at most
// activities.SinkBatchEvents events, stopping at Upto; it counts what it
// delivered and each event's lag, by sink.
func TestDeliverEventsInBatches(t *testing.T) {
	sink := &batchSink{}
	log := newFakeLog(700, 300, "x")
	acts := &activities.Activities{Sinks: map[string]hook.Sink{"audit": sink}, Logs: log}
	err, m := deliver(t, acts, activities.DeliverEventsInput{Sink: "audit", SessionID: "s1", After: 10, Upto: 650}, 0)
	require.NoError(t, err)
	require.Equal(t, [][2]int64{{11, 266}, {267, 300}, {301, 556}, {557, 650}}, sink.seqs())
	require.Equal(t, map[string]int64{instrument.SinkEventsTotal + "/audit": 640}, m.counts)
	require.Equal(t, map[string]int{instrument.SinkLag + "/audit": 640}, m.timers)
}

// A batch holds about activities.SinkBatchBytes of event JSON at most
// (one event at least, however large).
func TestDeliverEventsBoundsBatchBytes(t *testing.T) {
	sink := &batchSink{}
	log := newFakeLog(7, 0, strings.Repeat("y", 400<<10))
	acts := &activities.Activities{Sinks: map[string]hook.Sink{"audit": sink}, Logs: log}
	err, _ := deliver(t, acts, activities.DeliverEventsInput{Sink: "audit", SessionID: "s1", Upto: 7}, 0)
	require.NoError(t, err)
	require.Equal(t, [][2]int64{{1, 2}, {3, 4}, {5, 6}, {7, 7}}, sink.seqs())
}

// A retried attempt resumes after the cursor its predecessor heartbeat.
func TestDeliverEventsResumesAfterTheHeartbeat(t *testing.T) {
	sink := &batchSink{}
	acts := &activities.Activities{Sinks: map[string]hook.Sink{"audit": sink}, Logs: newFakeLog(50, 0, "x")}
	err, _ := deliver(t, acts, activities.DeliverEventsInput{Sink: "audit", SessionID: "s1", After: 5, Upto: 50}, 40)
	require.NoError(t, err)
	require.Equal(t, [][2]int64{{41, 50}}, sink.seqs())
}

// A failed batch fails the attempt, retryably, after the batches before
// it were delivered; a failure is counted.
func TestDeliverEventsFailsAtTheFailingBatch(t *testing.T) {
	sink := &batchSink{failAt: 257}
	acts := &activities.Activities{Sinks: map[string]hook.Sink{"audit": sink}, Logs: newFakeLog(600, 0, "x")}
	err, m := deliver(t, acts, activities.DeliverEventsInput{Sink: "audit", SessionID: "s1", Upto: 600}, 0)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.False(t, appErr.NonRetryable())
	require.Contains(t, err.Error(), "sink down")
	require.Equal(t, [][2]int64{{1, 256}}, sink.seqs())
	require.Equal(t, int64(1), m.counts[instrument.SinkFailuresTotal+"/audit"])
}

// A sink the worker does not have fails the delivery for good; so does a
// worker that cannot read logs.
func TestDeliverEventsToASinkNotOffered(t *testing.T) {
	for name, acts := range map[string]*activities.Activities{
		"unknown sink": {Sinks: map[string]hook.Sink{"audit": &batchSink{}}, Logs: newFakeLog(5, 0, "x")},
		"no log":       {Sinks: map[string]hook.Sink{"gone": &batchSink{}}},
	} {
		t.Run(name, func(t *testing.T) {
			err, _ := deliver(t, acts, activities.DeliverEventsInput{Sink: "gone", SessionID: "s1", Upto: 5}, 0)
			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr)
			require.Equal(t, activities.ErrSinkNotOffered, appErr.Type())
			require.True(t, appErr.NonRetryable())
		})
	}
}

// A log with a hole is never delivered past it.
func TestDeliverEventsRefusesAGap(t *testing.T) {
	sink := &batchSink{}
	log := newFakeLog(20, 0, "x")
	log.gap = 12
	acts := &activities.Activities{Sinks: map[string]hook.Sink{"audit": sink}, Logs: log}
	err, _ := deliver(t, acts, activities.DeliverEventsInput{Sink: "audit", SessionID: "s1", Upto: 20}, 0)
	require.ErrorContains(t, err, "not dense at 12")
	require.Empty(t, sink.seqs())
}
