package worker_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/internal/instrument"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/scripted"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

// seriesHandler records the tag sets of every metric recorded, per name.
type seriesHandler struct {
	tags   map[string]string
	series *series
}

type series struct {
	mu sync.Mutex
	m  map[string]map[string]bool // metric name → "model" tag values
}

func (h seriesHandler) WithTags(tags map[string]string) sdkclient.MetricsHandler {
	merged := map[string]string{}
	for k, v := range h.tags {
		merged[k] = v
	}
	for k, v := range tags {
		merged[k] = v
	}
	return seriesHandler{tags: merged, series: h.series}
}

func (h seriesHandler) note(name string) {
	model, ok := h.tags["model"]
	if !ok {
		return
	}
	h.series.mu.Lock()
	defer h.series.mu.Unlock()
	if h.series.m[name] == nil {
		h.series.m[name] = map[string]bool{}
	}
	h.series.m[name][model] = true
}

func (h seriesHandler) Counter(name string) sdkclient.MetricsCounter {
	return counterFunc(func(int64) { h.note(name) })
}

func (h seriesHandler) Gauge(name string) sdkclient.MetricsGauge {
	return gaugeFunc(func(float64) { h.note(name) })
}

func (h seriesHandler) Timer(name string) sdkclient.MetricsTimer {
	return timerFunc(func(time.Duration) { h.note(name) })
}

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }

type gaugeFunc func(float64)

func (f gaugeFunc) Update(d float64) { f(d) }

type timerFunc func(time.Duration)

func (f timerFunc) Record(d time.Duration) { f(d) }

// The attack: a client invents 1,000 model names under the operator's
// openai:* pattern. Each turn records keel's model metrics, and the
// "model" label takes at most MaxModelLabels values plus "other": the
// series do not grow with the names.
func TestInventedModelsAddBoundedSeries(t *testing.T) {
	quick, err := scripted.Parse([]byte(`{"repeat":true,"turns":[{"text":["ok"]}]}`))
	require.NoError(t, err)
	models := &worker.Models{
		Factories: map[string]func() (provider.Provider, error){"openai": func() (provider.Provider, error) {
			return scripted.New(quick), nil
		}},
		Allow: []string{"openai:*"},
	}
	tools, err := tool.NewRegistry()
	require.NoError(t, err)
	acts := &activities.Activities{Models: models, Tools: tools}
	var suite testsuite.WorkflowTestSuite
	rec := &series{m: map[string]map[string]bool{}}
	suite.SetMetricsHandler(seriesHandler{series: rec})
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(acts.ModelTurn, activity.RegisterOptions{Name: activities.ModelTurnName})
	for i := range 1000 {
		msgs := []keel.Message{keel.UserMessage("go")}
		_, err := env.ExecuteActivity(activities.ModelTurnName, activities.ModelTurnInput{
			SessionID: "s", RunID: "s/run-1", Step: 1, Attempt: 1, Model: fmt.Sprintf("openai:x%d", i),
			Transcript: activities.TranscriptRef{WorkflowID: "s/run-1", RunID: "e", Len: len(msgs)}, Tail: msgs,
		})
		require.NoError(t, err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	labels := rec.m[instrument.ModelTurnDuration]
	require.Len(t, labels, worker.MaxModelLabels+1, "distinct model labels of %s", instrument.ModelTurnDuration)
	require.True(t, labels[worker.OtherModelLabel])
	for name, values := range rec.m {
		require.LessOrEqual(t, len(values), worker.MaxModelLabels+1, "distinct model labels of %s", name)
	}
}
