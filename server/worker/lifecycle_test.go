package worker

import (
	"context"
	"sync"
	"testing"
	"time"
)

// scriptedQuery answers the probe's queries one at a time, when the test
// releases each, and counts them.
type scriptedQuery struct {
	started chan struct{}
	answers chan bool
}

func (q *scriptedQuery) query(ctx context.Context) (bool, error) {
	q.started <- struct{}{}
	select {
	case down := <-q.answers:
		return down, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// Concurrent askers share queries, an asker never gets the answer of a
// query sent before it asked, and shut down is remembered for good.
func TestShutdownProbeSharesQueriesWithoutStaleAnswers(t *testing.T) {
	q := &scriptedQuery{started: make(chan struct{}), answers: make(chan bool)}
	joined := make(chan struct{}, 10)
	p := &shutdownProbe{query: q.query, joined: func() { joined <- struct{}{} }}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	type answer struct {
		who  string
		down bool
	}
	results := make(chan answer, 10)
	ask := func(who string) {
		down, err := p.ask(ctx)
		if err != nil {
			t.Errorf("%s: %v", who, err)
		}
		results <- answer{who, down}
	}

	go ask("first")
	<-q.started // the first query is in flight
	// These ask while it is in flight: they must wait for a query of
	// their own, which all of them share.
	var wg sync.WaitGroup
	for _, who := range []string{"a", "b", "c"} {
		wg.Add(1)
		go func() { defer wg.Done(); ask(who) }()
	}
	// All three join the pending round before the first query returns.
	for range 3 {
		<-joined
	}
	q.answers <- false // the first query: not shut down
	if r := <-results; r.who != "first" || r.down {
		t.Fatalf("first answer %+v, want first=false", r)
	}
	<-q.started // exactly one more query for the three
	q.answers <- true
	wg.Wait()
	for range 3 {
		if r := <-results; !r.down {
			t.Fatalf("%s got the in-flight query's answer (false), not the shared next one (true)", r.who)
		}
	}
	// Shut down is for good: no more queries.
	if down, err := p.ask(ctx); err != nil || !down {
		t.Fatalf("after shutdown: %v %v", down, err)
	}
	select {
	case <-q.started:
		t.Fatal("a query was sent after shutdown was known")
	default:
	}
}
