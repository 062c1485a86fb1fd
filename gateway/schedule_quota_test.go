package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/devserver"
	"github.com/keelrun/keel/gateway"
	"github.com/keelrun/keel/internal/instrument"
	"github.com/keelrun/keel/internal/keeltest"
)

// TestScheduleLimits attacks a gateway over a server of its own, whose
// one worker holds schedules to small limits (docs/contract.md §22.11):
// the registry counts a whole namespace, which the package's other tests
// share.
func TestScheduleLimits(t *testing.T) {
	const (
		full  = "sched-quota-full-0123456789"
		teamA = "sched-quota-teama-0123456789"
		teamB = "sched-quota-teamb-0123456789"
	)
	srv := keeltest.StartServer(t, devserver.Config{})
	refused := newRefusals()
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Script: `{"repeat":true,"turns":[{"text":["ok"]}]}`,
		Schedules:      api.ScheduleLimits{Schedules: 5, PerPrefix: 2, MinInterval: api.MinScheduleEvery, SessionsPerHour: 2},
		MetricsHandler: refused})
	s := serveGateway(t, keeltest.Client(t, srv, nil),
		gateway.Options{Keys: []gateway.APIKey{{Key: full}, {Key: teamA, Prefix: "sq-a-"}, {Key: teamB, Prefix: "sq-b-"}}})
	admin := s.as(full)
	t.Run("QuotasHoldAtOnce", func(t *testing.T) {
		t.Cleanup(func() {
			for _, id := range admin.listed(t) {
				admin.call(t, http.MethodDelete, "/v1/schedules/"+id, nil)
			}
		})
		testQuotasHoldAtOnce(t, admin, s.as(teamA), s.as(teamB))
	})
	t.Run("SessionsPerHour", func(t *testing.T) {
		testSessionsPerHour(t, admin)
		if got := refused.get(); got != "map[sessions:1]" {
			t.Errorf("keel_schedule_firings_refused_total by reason: %s, want map[sessions:1]", got)
		}
	})
}

// refusals counts keel_schedule_firings_refused_total by its reason, and
// records nothing else.
type refusals struct {
	sdkclient.MetricsHandler
	reason string
	counts *refusalCounts
}

type refusalCounts struct {
	mu sync.Mutex
	n  map[string]int64
}

func newRefusals() refusals {
	return refusals{MetricsHandler: sdkclient.MetricsNopHandler, counts: &refusalCounts{n: map[string]int64{}}}
}

func (h refusals) WithTags(tags map[string]string) sdkclient.MetricsHandler {
	if r, ok := tags["reason"]; ok {
		h.reason = r
	}
	return h
}

func (h refusals) Counter(name string) sdkclient.MetricsCounter {
	if name != instrument.ScheduleFiringsRefusedTotal {
		return h.MetricsHandler.Counter(name)
	}
	return h
}

// Inc counts a refusal of h's reason.
func (h refusals) Inc(d int64) {
	h.counts.mu.Lock()
	defer h.counts.mu.Unlock()
	h.counts.n[h.reason] += d
}

func (h refusals) get() string {
	h.counts.mu.Lock()
	defer h.counts.mu.Unlock()
	return fmt.Sprint(h.counts.n)
}
