package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/claimcheck"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/store"
)

// TestStoreGC runs `keel store gc` on the store of a keel dev whose
// sessions were forked and rewound, beside objects nothing references,
// all written "hours ago" (their times moved back): a dry run deletes
// nothing; a collection killed with SIGKILL midway leaves every session
// readable; the next one deletes every orphan and nothing a session, a
// fork or a rewound-away run still names.
func TestStoreGC(t *testing.T) {
	rig := newDevKillRig(t, 4*time.Minute)
	ctx := rig.ctx
	st, codec, storeDir := rig.st, rig.codec, rig.storeDir
	p := rig.start()
	c := rig.dial(p)
	defer c.Close()
	run := func(s *client.Session, prompt string) {
		t.Helper()
		r, err := s.Send(ctx, prompt)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Outcome(ctx); err != nil {
			t.Fatalf("%s: %v", prompt, err)
		}
	}
	a := c.Session("gc-a")
	for _, prompt := range []string{"one", "two", "three"} {
		run(a, prompt)
	}
	b, _, err := a.Fork(ctx, api.Point{Run: 2}, "gc-b")
	if err != nil {
		t.Fatal(err)
	}
	run(b, "fork's own")
	if _, err := a.Rewind(ctx, api.Point{Run: 1}); err != nil {
		t.Fatal(err)
	}
	run(a, "after the rewind")

	// Orphans: enough small objects that the sweep reports progress (the
	// kill point), and a large value of several chunks.
	var orphans []claimcheck.Key
	for range 2500 {
		k, err := st.Put(ctx, []byte(rand.Text()))
		if err != nil {
			t.Fatal(err)
		}
		orphans = append(orphans, k)
	}
	big := make([]byte, 200<<10)
	_, _ = rand.Read(big)
	if _, err := codec.PutPayload(ctx, &commonpb.Payload{Data: big}); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-3 * time.Hour)
	objects := 0
	if err := filepath.WalkDir(storeDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		objects++
		return os.Chtimes(path, past, past)
	}); err != nil {
		t.Fatal(err)
	}

	// readAll reads every session's transcript and log, values in the
	// store and event segments included.
	readAll := func() {
		t.Helper()
		for _, s := range []*client.Session{a, b} {
			h, err := s.History(ctx, 0, 10000)
			if err != nil || len(h.Messages) == 0 {
				t.Fatalf("%s history: %d messages, %v", s.ID(), len(h.Messages), err)
			}
			log, err := s.EventsAfter(ctx, 0)
			if err != nil || len(log) == 0 {
				t.Fatalf("%s events: %d, %v", s.ID(), len(log), err)
			}
			state, err := s.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// A fork's runs before its point are its source's.
			for r := state.Runs; r >= 1; r-- {
				_, err := s.Run(r).Outcome(ctx)
				if s == b && errors.Is(err, keel.ErrNotFound) {
					break
				}
				if err != nil {
					t.Fatalf("%s run %d of %d: %v", s.ID(), r, state.Runs, err)
				}
			}
		}
	}
	readAll()
	refs := checkReferences(t, ctx, p.address, codec)
	gcArgs := []string{"--address", p.address, "--store", rig.storeURL}

	// Reading writes too (query answers over 4 KiB go to the store), so
	// count now.
	before := countFiles(t, storeDir)
	var out, errOut bytes.Buffer
	if code := cmdStore(ctx, append([]string{"gc", "--dry-run"}, gcArgs...), &out, &errOut); code != exitOK {
		t.Fatalf("dry run: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "would delete") || countFiles(t, storeDir) != before {
		t.Fatalf("dry run deleted something: %d of %d objects left; %s", countFiles(t, storeDir), before, out.String())
	}

	// kill -9 as soon as the sweep reports its first thousand objects.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	gc := exec.Command(exe, append([]string{"store", "gc"}, gcArgs...)...)
	gc.Env = append(os.Environ(), envRunAsKeel+"=1")
	stderr, err := gc.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := gc.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if strings.Contains(lines.Text(), "listed 1000 objects") {
			_ = gc.Process.Kill()
			break
		}
	}
	err = gc.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != -1 {
		t.Fatalf("the collection was not killed midway: %v", err)
	}
	afterKill := countFiles(t, storeDir)
	t.Logf("killed keel store gc: %d of %d objects left", afterKill, objects)
	checkReferences(t, ctx, p.address, codec)
	readAll()

	out.Reset()
	errOut.Reset()
	if code := cmdStore(ctx, append([]string{"gc"}, gcArgs...), &out, &errOut); code != exitOK {
		t.Fatalf("gc: exit %d: %s", code, errOut.String())
	}
	t.Logf("keel store gc: %s", out.String())
	for _, k := range orphans {
		if _, err := st.Get(ctx, k); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("orphan %s: %v", k, err)
		}
	}
	left := countFiles(t, storeDir)
	if left > objects-len(orphans)-2 {
		t.Fatalf("%d of %d objects left after gc", left, objects)
	}
	if n := checkReferences(t, ctx, p.address, codec); n < refs {
		t.Fatalf("%d references in histories, %d before", n, refs)
	}
	readAll()
	// A worker that starts again replays every session from its history,
	// reading what the references name.
	p.kill()
	p = rig.start()
	c2 := rig.dial(p)
	defer c2.Close()
	a, b = c2.Session("gc-a"), c2.Session("gc-b")
	readAll()
	run(b, "after the collection")
	gcArgs[1] = p.address
	// What is left is all referenced: another collection deletes nothing.
	out.Reset()
	if code := cmdStore(ctx, append([]string{"gc"}, gcArgs...), &out, &errOut); code != exitOK || !strings.Contains(out.String(), "deleted 0 ") {
		t.Fatalf("second gc: exit %d: %s", code, out.String())
	}
}

// checkReferences decodes every reference in every history of the
// namespace at address and returns how many there are.
func checkReferences(t *testing.T, ctx context.Context, address string, codec *store.Codec) int {
	t.Helper()
	tc, err := sdkclient.Dial(sdkclient.Options{HostPort: address, Logger: (&connFlags{}).temporalLogger(os.Stderr)})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	page, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: defaultNamespace})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ex := range page.GetExecutions() {
		it := tc.GetWorkflowHistory(ctx, ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			for p := range store.Payloads(ev) {
				if claimcheck.IsReference(p) {
					n++
					if _, err := codec.Decode([]*commonpb.Payload{p}); err != nil {
						t.Fatalf("%s event %d: %v", ex.GetExecution().GetWorkflowId(), ev.GetEventId(), err)
					}
				}
			}
		}
	}
	if n == 0 || len(page.GetNextPageToken()) != 0 {
		t.Fatalf("%d references; more pages: %v", n, len(page.GetNextPageToken()) != 0)
	}
	return n
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	if err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n
}
