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
	"github.com/keelrun/keel/internal/instrument"
	"github.com/keelrun/keel/internal/schedreg"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/gateway"
	"github.com/keelrun/keel/server/internal/keeltest"
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
		Schedules:      schedreg.ScheduleLimits{Schedules: 5, PerPrefix: 2, MinInterval: api.MinScheduleEvery, SessionsPerHour: 2},
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

// createAtOnce creates n schedules named prefix0, prefix1... at once and
// returns how many were created; every other answer must be 429
// too_many.
func (s *stack) createAtOnce(t *testing.T, prefix string, n int) int {
	t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
	)
	for i := range n {
		wg.Go(func() {
			r := s.call(t, http.MethodPost, "/v1/schedules", map[string]any{"id": fmt.Sprintf("%s%d", prefix, i), "every": "1h", "prompt": "x"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r.status == http.StatusCreated:
				created++
			case r.status != http.StatusTooManyRequests || r.code() != "too_many":
				t.Errorf("create %s%d: %d %s", prefix, i, r.status, r.raw)
			}
		})
	}
	wg.Wait()
	return created
}

// testQuotasHoldAtOnce (attack 2): a prefix key that creates schedules
// as fast as it can holds its prefix's quota (2) and no more, and the
// namespace's quota (5) is never overshot: the count and the place taken
// are one update of the namespace's registry. A key limited to a prefix
// then no longer fills the namespace for every other key (1,008 of 1,000
// were held, 16 creates at a time, and the full key got 429).
func testQuotasHoldAtOnce(t *testing.T, admin, a, b *stack) {
	if n := a.createAtOnce(t, "sq-a-", 6); n != 2 {
		t.Fatalf("prefix sq-a- created %d of 6 at once; its quota is 2", n)
	}
	if n := b.createAtOnce(t, "sq-b-", 6); n != 2 {
		t.Fatalf("prefix sq-b- created %d of 6 at once; its quota is 2", n)
	}
	// The namespace holds 4 of 5: the full key takes the last place.
	if n := admin.createAtOnce(t, "sq-admin-", 4); n != 1 {
		t.Fatalf("the full key created %d of 4 at once with one place left", n)
	}
	r := admin.call(t, http.MethodPost, "/v1/schedules", map[string]any{"id": "sq-more", "every": "1h", "prompt": "x"})
	if r.status != http.StatusTooManyRequests || r.body["message"] != "the namespace holds the most schedules it may: 5" {
		t.Fatalf("past the namespace's quota: %d %s", r.status, r.raw)
	}
	// A place given back is free again, to the prefix it was taken from.
	var own string
	for _, id := range admin.listed(t) {
		if strings.HasPrefix(id, "sq-a-") {
			own = id
		}
	}
	a.call(t, http.MethodDelete, "/v1/schedules/"+own, nil).must(t, http.StatusOK)
	a.call(t, http.MethodPost, "/v1/schedules", map[string]any{"id": "sq-a-again", "every": "1h", "prompt": "x"}).
		must(t, http.StatusCreated)
	if r := a.call(t, http.MethodPost, "/v1/schedules", map[string]any{"id": "sq-a-more", "every": "1h", "prompt": "x"}); r.status != http.StatusTooManyRequests {
		t.Fatalf("prefix sq-a- past its quota again: %d %s", r.status, r.raw)
	}
}

// testSessionsPerHour (attack 3): a schedule that makes a new
// session each firing makes no more than its worker's
// schedule_sessions_per_hour allows (2 here), however often it fires:
// the third firing, a second after the second, sends nothing and shows
// as refused (keel.TooMany), where 29 sessions of a 256 KiB prompt each
// were made in 30 s.
func testSessionsPerHour(t *testing.T, s *stack) {
	s.call(t, http.MethodPost, "/v1/schedules", map[string]any{"id": "sph", "every": "1h", "new_session": true, "prompt": "x"}).
		must(t, http.StatusCreated)
	var st gateway.ScheduleStatus
	for n := 1; n <= 3; n++ {
		if n > 1 {
			// The least interval (a second) between two firings'
			// times, so that only the sessions can refuse the next.
			last := st.Recent[n-2].ScheduledAt
			s.waitSchedule(t, "sph", "a second past the last firing", func(gateway.ScheduleStatus) bool {
				return time.Since(last) > time.Second
			})
		}
		s.call(t, http.MethodPost, "/v1/schedules/sph/trigger", nil).must(t, http.StatusAccepted)
		st = s.waitSchedule(t, "sph", fmt.Sprintf("firing %d", n), func(st gateway.ScheduleStatus) bool {
			return len(st.Recent) == n && st.Recent[n-1].Status != api.FiringSending
		})
	}
	sessions := map[string]bool{}
	for _, f := range st.Recent[:2] {
		if f.Status != api.FiringSent || f.Result == nil {
			t.Fatalf("firing: %+v (error %+v)", f, f.Error)
		}
		sessions[f.Result.Session] = true
	}
	if f := st.Recent[2]; f.Status != api.FiringRefused || f.Error == nil || f.Error.Code != "keel.TooMany" ||
		!strings.Contains(f.Error.Message, "2 an hour") || f.Result == nil || f.Result.Number != 0 {
		t.Fatalf("third firing: %+v (error %+v)", f, f.Error)
	}
	if len(sessions) != 2 {
		t.Fatalf("sessions made: %v", sessions)
	}
}
