package bench_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/logging"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/internal/stack"
	"github.com/keelrun/keel/server/store"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

// growthWindow is how many runs the first and last windows of
// BenchmarkStoreGrowth span.
const growthWindow = 10

// BenchmarkStoreGrowth plays one session of b.N runs, each reading a
// file of 64 KiB of new content (random base64, rewritten before every
// run) and answering, twice in the same process: once with the content
// store's codec storing each offloaded payload as one object (as keel did
// before chunking, store.CodecOptions.WholeObjects) and once chunked (the
// default). Each side has its own embedded server, worker and store. It
// reports the store's bytes (the objects' sizes, and blocks on disk) added
// per run over the first and the last growthWindow runs and over all of
// them, each against the 64 KiB of new content, and chunked against
// whole. Compaction and hand-over limits are the defaults. A third side,
// chunked, rewinds every second run away right after it (to the run
// before; a run that compacted the transcript cannot be rewound, and is
// counted), so that half of its runs are rewound. Then it runs `keel store
// gc`'s collection on the two chunked stores (growthPlayer.collect).
//
//	go test -run '^$' -bench StoreGrowth -benchtime 100x -timeout 60m ./server/bench/
func BenchmarkStoreGrowth(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 58*time.Minute)
	defer cancel()
	players := []*growthPlayer{newGrowthPlayer(ctx, b, true, false), newGrowthPlayer(ctx, b, false, false),
		newGrowthPlayer(ctx, b, false, true)}
	runs := 0
	for b.Loop() {
		runs++
		for _, p := range players {
			p.run(ctx, b, runs)
		}
	}
	if runs < 2*growthWindow {
		b.Logf("%d runs: at least %d needed for a report", runs, 2*growthWindow)
		return
	}
	sides := []growthSide{players[0].side(runs), players[1].side(runs), players[2].side(runs)}
	whole, chunked := sides[0], sides[1]
	fmt.Printf("\ncontent-store growth over %d runs of %d KiB of new content each\n", runs, longBigBytes>>10)
	fmt.Printf("%-32s %14s %14s %14s %12s %10s\n", "", "runs 1-10", "last 10", "all runs", "disk/run", "run wall")
	for _, s := range sides {
		fmt.Printf("%-32s %14s %14s %14s %12s %10s\n", s.name, perRun(s.first), perRun(s.last), perRun(s.all),
			fmt.Sprintf("%.0f KiB", s.diskPerRun/1024), s.wall.Round(time.Millisecond))
	}
	fmt.Printf("%-32s %14.2f %14.2f %14.2f\n", "chunked / whole",
		chunked.first/whole.first, chunked.last/whole.last, chunked.all/whole.all)
	fmt.Printf("chunked, last %d runs: %.2f× the new content (target ≤ 1.5×); last/first window %.2f\n",
		growthWindow, chunked.last/longBigBytes, chunked.last/chunked.first)
	b.ReportMetric(chunked.all/longBigBytes, "chunked-x-content")
	b.ReportMetric(whole.all/longBigBytes, "whole-x-content")
	r := players[2]
	fmt.Printf("%s: %d runs rewound away, %d not (they compacted)\n", r.side(runs).name, r.rewound, r.unrewindable)
	content := float64(runs) * longBigBytes
	fmt.Printf("\nkeel store gc after %d runs (%.1f MiB of new content each side)\n", runs, content/(1<<20))
	fmt.Printf("%-58s %12s %12s %12s\n", "", "freed", "kept", "kept/content")
	for _, p := range players[1:] {
		p.collect(ctx, b, runs)
	}
}

func perRun(bytes float64) string {
	return fmt.Sprintf("%.0f KiB %.2f×", bytes/1024, bytes/longBigBytes)
}

// growthSide is one side's bytes added per run (object sizes): over the
// first window, the last window and all runs.
type growthSide struct {
	name             string
	first, last, all float64
	diskPerRun       float64
	wall             time.Duration
}

// growthPlayer is one side of BenchmarkStoreGrowth: a server, worker,
// store and session of its own.
type growthPlayer struct {
	whole bool
	// rewinding rewinds every second run away; rewound and unrewindable
	// count the runs it did and could not.
	rewinding             bool
	rewound, unrewindable int
	srv                   *devserver.Server
	st                    *store.Store
	storeDir              string
	workspace             string
	sess                  *client.Session
	content               []byte
	sizes                 []int64
	disk0                 int64
	wall                  time.Duration
}

func newGrowthPlayer(ctx context.Context, b *testing.B, whole, rewinding bool) *growthPlayer {
	dataDir := b.TempDir()
	srv := keeltest.StartServer(b, devserver.Config{DataDir: dataDir})
	p := &growthPlayer{whole: whole, rewinding: rewinding, srv: srv, storeDir: filepath.Join(dataDir, "store"), workspace: b.TempDir(),
		content: make([]byte, longBigBytes*3/4)}
	st, err := store.Open(ctx, "file://"+p.storeDir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	p.st = st
	codec := store.NewCodec(st, store.CodecOptions{WholeObjects: whole})
	tools, err := tool.Builtins(p.workspace)
	if err != nil {
		b.Fatal(err)
	}
	book := &keeltest.ScriptBook{}
	model := book.Add(b, "growth", readFileScript("big.txt"))
	cfg := srv.Config()
	stk, err := stack.Build(ctx, stack.Config{Server: srv, Store: stack.StoreConfig{Codec: codec},
		Worker: &worker.Options{Models: book, Tools: tools, StopTimeout: time.Second,
			Logger: logging.AtLeast(cfg.Logger, cfg.LogLevel)}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = stk.Stop() })
	c, err := client.Dial(ctx, client.Options{Temporal: keeltest.Dial(b, srv), DataConverter: store.NewDataConverter(codec),
		Config: api.RunConfig{Model: model, Tools: []string{"read_file"}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	p.sess = c.Session("growth")
	if rewinding {
		// Another session ID: a store's objects are named by content,
		// and the two chunked sides' first values must not be the
		// same objects by accident.
		p.sess = c.Session("growth-rewound")
	}
	p.sizes = []int64{objectBytes(b, p.storeDir)}
	p.disk0, _ = dirSize(p.storeDir)
	return p
}

// run plays run i: new content in big.txt, a prompt, the store's size.
func (p *growthPlayer) run(ctx context.Context, b *testing.B, i int) {
	_, _ = rand.Read(p.content)
	if err := os.WriteFile(filepath.Join(p.workspace, "big.txt"), []byte(base64.StdEncoding.EncodeToString(p.content)), 0o600); err != nil {
		b.Fatal(err)
	}
	_, wall, err := longRun(ctx, p.sess, fmt.Sprintf("prompt %d", i))
	if err != nil {
		b.Fatalf("run %d (whole objects %v): %v", i, p.whole, err)
	}
	p.wall += wall
	if p.rewinding && i%2 == 0 {
		_, err := p.sess.Rewind(ctx, api.Point{Run: i - 1})
		switch {
		case errors.Is(err, keel.ErrNotFound):
			p.unrewindable++
		case err != nil:
			b.Fatalf("rewind run %d: %v", i, err)
		default:
			p.rewound++
		}
	}
	p.sizes = append(p.sizes, objectBytes(b, p.storeDir))
}

func (p *growthPlayer) side(runs int) growthSide {
	disk, _ := dirSize(p.storeDir)
	name := "chunked (now)"
	switch {
	case p.whole:
		name = "whole objects (before)"
	case p.rewinding:
		name = "chunked, every 2nd run rewound"
	}
	per := func(from, to int) float64 { return float64(p.sizes[to]-p.sizes[from]) / float64(to-from) }
	return growthSide{name: name, first: per(0, growthWindow), last: per(runs-growthWindow, runs), all: per(0, runs),
		diskPerRun: float64(disk-p.disk0) / float64(runs), wall: p.wall / time.Duration(runs)}
}

// objectBytes is the sum of the sizes of the store's objects.
func objectBytes(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		b.Fatal(err)
	}
	return n
}

// collect reports what `keel store gc` frees from the player's store (the
// same Collector and marking, with no grace period left): first as the
// runs left it, while Temporal retains the executions of every run; then
// once those closed executions are gone, as the namespace's retention
// drops them (deleted here at once). What stays is what the session's
// current execution reaches: its transcript (which a rewind cut) and its
// log of every run (which a rewind keeps).
func (p *growthPlayer) collect(ctx context.Context, b *testing.B, runs int) {
	tc, err := p.srv.Dial(ctx, sdkclient.Options{}) // payloads as stored
	if err != nil {
		b.Fatal(err)
	}
	defer tc.Close()
	name := p.side(runs).name
	content := float64(runs) * longBigBytes
	collect := func(when string) {
		// Now is a grace period ahead: every object written so far is
		// old enough to go if nothing references it.
		c, err := p.st.NewCollector(store.CollectOptions{Grace: store.MinGrace,
			Now: func() time.Time { return time.Now().Add(store.MinGrace) }})
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := c.MarkNamespace(ctx, tc, p.srv.Namespace(), nil); err != nil {
			b.Fatalf("gc %s: %v", when, err)
		}
		stats, err := c.Sweep(ctx, nil)
		if err != nil {
			b.Fatalf("gc %s: %v", when, err)
		}
		kept := float64(stats.KeptBytes + stats.YoungBytes)
		fmt.Printf("%-58s %8.1f MiB %8.1f MiB %12.2f\n", name+", "+when, float64(stats.DeletedBytes)/(1<<20),
			kept/(1<<20), kept/content)
	}
	collect("histories retained")
	closed := fmt.Sprintf("WorkflowId = '%s' AND ExecutionStatus != 'Running'", p.sess.ID())
	var token []byte
	deleted := 0
	for {
		page, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: p.srv.Namespace(),
			Query: closed, NextPageToken: token})
		if err != nil {
			b.Fatal(err)
		}
		for _, ex := range page.GetExecutions() {
			if _, err := tc.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
				Namespace: p.srv.Namespace(), WorkflowExecution: ex.GetExecution()}); err != nil {
				b.Fatal(err)
			}
			deleted++
		}
		if token = page.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	// Visibility forgets a deleted execution a little after its history
	// is gone; marking lists executions through it.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for ; ; <-tick.C {
		n, err := tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: p.srv.Namespace(), Query: closed})
		if err != nil {
			b.Fatal(err)
		}
		if n.GetCount() == 0 {
			break
		}
		if ctx.Err() != nil {
			b.Fatalf("%d closed executions still listed", n.GetCount())
		}
	}
	collect(fmt.Sprintf("%d closed executions gone", deleted))
}
