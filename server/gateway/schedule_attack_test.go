package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/gateway"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// Attacks on the schedule routes with narrowed keys (docs/security.md,
// "Attacks tried"; issue 34).

// TestScheduleIDsUnderAPrefixAreItsOwn (attack 5): a schedule a prefix
// key does not reach tells it nothing, whatever the route. The full key
// cannot name a schedule under the prefix with firings that go outside
// it (such a schedule answered the prefix key 404 on GET and "exists" on
// POST), and an ID outside the prefix answers the same whether it is
// taken or free.
func TestScheduleIDsUnderAPrefixAreItsOwn(t *testing.T) {
	const (
		full   = "sched-own-full-0123456789"
		team   = "sched-own-team-0123456789"
		prefix = "sown-a-"
	)
	s := startGateway(t, gateway.Options{Keys: []gateway.APIKey{{Key: full}, {Key: team, Prefix: prefix}}})
	admin, tm := s.as(full), s.as(team)
	admin.call(t, http.MethodPost, "/v1/schedules", map[string]any{"id": "sown-admin", "every": "1h", "prompt": "x"}).
		must(t, http.StatusCreated)
	t.Cleanup(func() { admin.call(t, http.MethodDelete, "/v1/schedules/sown-admin", nil) })

	// A decoy under the prefix that sends outside it is refused, to the
	// full key as to any other, at create and at update.
	if r := admin.call(t, http.MethodPost, "/v1/schedules", map[string]any{"id": prefix + "decoy", "every": "1h", "prompt": "x",
		"session": "sown-admin-session"}); r.status != http.StatusBadRequest || r.code() != "invalid_input" {
		admin.call(t, http.MethodDelete, "/v1/schedules/"+prefix+"decoy", nil)
		t.Fatalf("a decoy under the prefix: %d %s", r.status, r.raw)
	}
	if r := admin.call(t, http.MethodPatch, "/v1/schedules/sown-admin", map[string]any{"new_session": false,
		"session": prefix + "x"}); r.status != http.StatusOK {
		t.Fatalf("the full key's schedule may send under the prefix: %d %s", r.status, r.raw)
	}

	// The prefix key: the decoy's ID is free, so it creates it.
	tm.call(t, http.MethodPost, "/v1/schedules", map[string]any{"id": prefix + "decoy", "every": "1h", "prompt": "x"}).
		must(t, http.StatusCreated)
	t.Cleanup(func() { tm.call(t, http.MethodDelete, "/v1/schedules/"+prefix+"decoy", nil) })
	// Outside its prefix, taken and free answer alike.
	taken := tm.call(t, http.MethodPost, "/v1/schedules", map[string]any{"id": "sown-admin", "every": "1h", "prompt": "x"})
	free := tm.call(t, http.MethodPost, "/v1/schedules", map[string]any{"id": "sown-free", "every": "1h", "prompt": "x"})
	if taken.status != free.status || taken.body["message"] != free.body["message"] || taken.status != http.StatusForbidden {
		t.Fatalf("outside the prefix: taken %d %s, free %d %s", taken.status, taken.raw, free.status, free.raw)
	}
	for _, id := range []string{"sown-admin", "sown-free"} {
		if r := tm.call(t, http.MethodGet, "/v1/schedules/"+id, nil); r.status != http.StatusNotFound ||
			r.body["message"] != "schedule "+id+" not found" {
			t.Fatalf("GET %s: %d %s", id, r.status, r.raw)
		}
	}
}

// TestScheduleListWithAPrefixDescribesNothing (attack 6): listing
// schedules with a prefix key costs what listing with the full key does:
// no call per schedule (each was a DescribeSchedule, 0.99 s for 200
// against 0.11 s), counted on the gateway's Temporal connection. The list
// still holds only what the key reaches.
func TestScheduleListWithAPrefixDescribesNothing(t *testing.T) {
	const (
		full   = "sched-list-full-0123456789"
		team   = "sched-list-team-0123456789"
		prefix = "slist-a-"
	)
	var describes atomic.Int64
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker,
		opts ...grpc.CallOption) error {
		if strings.HasSuffix(method, "/DescribeSchedule") {
			describes.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	tc, err := shared.srv.Dial(context.Background(), sdkclient.Options{DataConverter: converter.GetDefaultDataConverter(),
		ConnectionOptions: sdkclient.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	c, err := client.Dial(context.Background(), client.Options{Temporal: tc,
		Live: keeltest.DialNATS(t, shared.nats.ClientURL(), live.NATSOptions{}), DataConverter: converter.GetDefaultDataConverter()})
	if err != nil {
		t.Fatal(err)
	}
	s := serveGateway(t, c, gateway.Options{Keys: []gateway.APIKey{{Key: full}, {Key: team, Prefix: prefix}}})
	admin, tm := s.as(full), s.as(team)
	var ids []string
	for _, id := range []string{"a1", "a2", "a3", "a4", "a5"} {
		tm.call(t, http.MethodPost, "/v1/schedules", map[string]any{"id": prefix + id, "every": "1h", "prompt": "x"}).
			must(t, http.StatusCreated)
		ids = append(ids, prefix+id)
	}
	admin.call(t, http.MethodPost, "/v1/schedules", map[string]any{"id": "slist-admin", "every": "1h", "prompt": "x"}).
		must(t, http.StatusCreated)
	t.Cleanup(func() {
		for _, id := range append(ids, "slist-admin") {
			admin.call(t, http.MethodDelete, "/v1/schedules/"+id, nil)
		}
	})
	admin.listed(t, append(ids, "slist-admin")...)

	describes.Store(0)
	got := tm.listed(t, ids...)
	if n := describes.Load(); n != 0 {
		t.Errorf("a list of %d schedules with a prefix key made %d DescribeSchedule calls, want 0", len(got), n)
	}
	for _, id := range got {
		if !strings.HasPrefix(id, prefix) {
			t.Errorf("the prefix key lists %s", id)
		}
	}
}

// TestScheduleFiringLimitsByDefault (attack 3, as keel dev runs): the
// attacker's schedule, a 256 KiB prompt every second into a new session
// each time, is refused by the default minimum interval (a minute); a
// firing triggered within a minute of the last is refused, sends
// nothing, and shows as refused in the description.
func TestScheduleFiringLimitsByDefault(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	big := strings.Repeat("x", api.MaxPromptBytes)
	r := s.call(t, http.MethodPost, "/v1/schedules", map[string]any{"id": "sfl-flood", "every": "1s", "new_session": true, "prompt": big})
	if r.status == http.StatusCreated {
		s.call(t, http.MethodDelete, "/v1/schedules/sfl-flood", nil)
	}
	if r.status != http.StatusBadRequest || !strings.Contains(r.body["message"].(string), "1m0s") {
		t.Fatalf("every second: %d %.300s", r.status, r.raw)
	}

	m := model(t, `{"repeat":true,"turns":[{"text":["ok"]}]}`)
	// An ID of its own each time: the registry keeps a deleted
	// schedule's pace for its ID.
	id := fmt.Sprintf("sfl-twice-%d", time.Now().UnixNano())
	s.call(t, http.MethodPost, "/v1/schedules", map[string]any{"id": id, "every": "1h", "new_session": true, "prompt": "x",
		"config": map[string]any{"model": m}}).must(t, http.StatusCreated)
	t.Cleanup(func() { s.call(t, http.MethodDelete, "/v1/schedules/"+id, nil) })
	s.call(t, http.MethodPost, "/v1/schedules/"+id+"/trigger", nil).must(t, http.StatusAccepted)
	s.waitSchedule(t, id, "the first firing", func(st gateway.ScheduleStatus) bool {
		return len(st.Recent) == 1 && st.Recent[0].Status == api.FiringSent
	})
	s.call(t, http.MethodPost, "/v1/schedules/"+id+"/trigger", nil).must(t, http.StatusAccepted)
	st := s.waitSchedule(t, id, "the second firing", func(st gateway.ScheduleStatus) bool {
		return len(st.Recent) == 2 && st.Recent[1].Status != api.FiringSending
	})
	f := st.Recent[1]
	if f.Status != api.FiringRefused || f.Error == nil || f.Error.Code != "keel.TooMany" || f.Result == nil || f.Result.Number != 0 {
		t.Fatalf("second firing: %+v (error %+v)", f, f.Error)
	}
}

// as is s with another key.
func (s *stack) as(key string) *stack { c := *s; c.key = key; return &c }
