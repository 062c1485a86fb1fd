package worker

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/store"
)

// noticeLog records the cancel notices sent.
type noticeLog struct {
	mu   sync.Mutex
	sent []live.CancelNotice
}

func (l *noticeLog) NotifyCancel(n live.CancelNotice) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent = append(l.sent, n)
	return nil
}

func (*noticeLog) OnCancel(func(live.CancelNotice)) (func(), error) { return func() {}, nil }

type replayRegistry struct{ sdkworker.WorkflowReplayer }

func (replayRegistry) RegisterActivityWithOptions(any, activity.RegisterOptions) {}

// The cancel notifier only watches: every recorded history of keel's
// workflows (docs/testing.md) replays with it in the worker's interceptors,
// the cancelled run's included, and a replay sends no notice.
func TestCancelNotifierKeepsHistories(t *testing.T) {
	dir := filepath.Join("..", "workflows", "testdata")
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(paths) < 5 {
		t.Fatalf("recorded histories in %s: %v (%d found)", dir, err, len(paths))
	}
	st, err := store.Open(context.Background(), filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			sent := &noticeLog{}
			notifier, stop := newCancelNotifier(sent, zap.NewNop())
			r, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{
				DataConverter: store.NewDataConverter(store.NewCodec(st, store.CodecOptions{})),
				Interceptors:  []interceptor.WorkerInterceptor{notifier},
			})
			if err != nil {
				t.Fatal(err)
			}
			Register(replayRegistry{r}, &activities.Activities{})
			logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
			err = r.ReplayWorkflowHistoryFromJSONFile(logger, path)
			stop() // sends what was queued
			if err != nil {
				t.Fatalf("replay with the cancel notifier: %v", err)
			}
			if len(sent.sent) > 0 {
				t.Fatalf("a replay sent cancel notices: %v", sent.sent)
			}
		})
	}
}
