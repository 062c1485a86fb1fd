package e2e_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/claimcheck"
	"github.com/keelrun/keel/crypt"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// A fork of an encrypted session stays encrypted, with the key that is
// current when it is made (docs/contract.md §19): the source ran under k1;
// after a rotation to k2 a fork is made and run, and every payload of the
// fork's executions is encrypted with k2 or a reference to ciphertext,
// none holds a marker in the clear, and the fork's transcript, read
// through the codec, carries the source's run.
func TestForkOfEncryptedSession(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	srv := keeltest.StartServer(t, devserver.Config{})
	storeDir, st, tools := encFixture(t, ctx)

	keys := map[string]string{}
	first := startEncStack(t, ctx, srv, st, writeKeyFile(t, keys, "k1"), tools)
	run, err := first.c.Session("enc-source").Send(ctx, "please look "+promptMarker)
	require.NoError(t, err)
	_, err = run.Outcome(ctx)
	require.NoError(t, err)

	first.w.Stop()
	rotated := startEncStack(t, ctx, srv, st, writeKeyFile(t, keys, "k2", "k1"), tools)
	fork, _, err := rotated.c.Session("enc-source").Fork(ctx, api.Point{Run: 1}, "enc-fork")
	require.NoError(t, err)
	forkRun, err := fork.Send(ctx, "and again")
	require.NoError(t, err)
	out, err := forkRun.Outcome(ctx)
	require.NoError(t, err)
	require.Contains(t, out.Text, responseMarker)

	hist, err := fork.History(ctx, 0, 0)
	require.NoError(t, err)
	transcript, err := json.Marshal(hist.Messages)
	require.NoError(t, err)
	for _, m := range encMarkers {
		require.Contains(t, string(transcript), m, "the fork's transcript, read through the codec, holds %s", m)
	}

	keyIDs := map[string]int{}
	executions := 0
	for id, events := range rawHistories(t, ctx, srv) {
		if !strings.HasPrefix(id, "enc-fork/") {
			continue
		}
		executions++
		for _, ev := range events {
			raw, err := proto.Marshal(ev)
			require.NoError(t, err)
			for _, m := range encMarkers {
				require.False(t, bytes.Contains(raw, []byte(m)), "%s event %d (%s) holds %s", id, ev.GetEventId(), ev.GetEventType(), m)
			}
			for _, p := range payloadsOf(t, ev) {
				switch {
				case crypt.IsEncrypted(p):
					keyIDs[crypt.KeyID(p)]++
				case claimcheck.IsReference(p):
					keyIDs["reference"]++
				default:
					t.Errorf("%s event %d (%s): a payload in the clear: %v", id, ev.GetEventId(), ev.GetEventType(), p.GetMetadata())
				}
			}
		}
	}
	t.Logf("the fork's %d executions: payloads %v", executions, keyIDs)
	require.Positive(t, executions)
	require.Positive(t, keyIDs["k2"], "the fork writes with the current key")
	require.Zero(t, keyIDs["k1"], "the fork wrote a payload with the retired key")

	// Nor does the content store hold a marker in the clear: the source's
	// objects, the fork's input, its run.
	require.NoError(t, filepath.WalkDir(storeDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, m := range encMarkers {
			require.False(t, bytes.Contains(b, []byte(m)), "store object %s holds %s", path, m)
		}
		return nil
	}))
}
