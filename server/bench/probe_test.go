package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/keelrun/keel/server/bench"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// TestProbes runs every bare-Temporal probe a few times on one server and
// checks that each returns one positive sample per round trip asked for.
func TestProbes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := keeltest.StartServer(t, devserver.Config{})
	c, observer := keeltest.Dial(t, srv), keeltest.Dial(t, srv)
	const n = 3
	for _, p := range []struct {
		name    string
		measure func() (bench.Latencies, error)
		want    int
	}{
		{"activity", func() (bench.Latencies, error) { return bench.MeasureActivityRoundTrip(ctx, c, "", n) }, n},
		{"signal to history", func() (bench.Latencies, error) { return bench.MeasureSignalToHistory(ctx, c, observer, n) }, n},
		{"signal handled", func() (bench.Latencies, error) { return bench.MeasureSignalHandled(ctx, c, observer, "", n) }, n},
		{"query", func() (bench.Latencies, error) { return bench.MeasureQueryRoundTrip(ctx, c, "", n) }, n},
		{"update", func() (bench.Latencies, error) { return bench.MeasureUpdateRoundTrip(ctx, c, "", n) }, n},
		// 2 workflows of (3+1)/2+1 = 3 activities: 2 intervals each.
		{"concurrent activities", func() (bench.Latencies, error) { return bench.MeasureConcurrentActivities(ctx, c, 2, n) }, 4},
	} {
		t.Run(p.name, func(t *testing.T) {
			lat, err := p.measure()
			if err != nil {
				t.Fatal(err)
			}
			if len(lat) != p.want {
				t.Fatalf("%d samples, want %d: %v", len(lat), p.want, lat)
			}
			for _, d := range lat {
				if d <= 0 {
					t.Errorf("sample %v is not positive: %v", d, lat)
				}
			}
		})
	}
	if _, err := bench.MeasureActivityRoundTrip(ctx, c, "", 0); err == nil {
		t.Error("MeasureActivityRoundTrip with n = 0 succeeded")
	}
}
