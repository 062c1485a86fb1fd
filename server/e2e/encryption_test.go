package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protopath"
	"google.golang.org/protobuf/reflect/protorange"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/claimcheck"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/crypt"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/store"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

// Markers that appear in exactly one kind of value each: the prompt, a
// small tool result (kept inline), a large one (offloaded to the store),
// and the model's answer.
const (
	promptMarker   = "PROMPT-c1d2e3f4"
	toolMarker     = "TOOLRESULT-a9b8c7d6"
	bigToolMarker  = "BIGRESULT-0f1e2d3c"
	responseMarker = "RESPONSE-5a6b7c8d"
)

var encMarkers = []string{promptMarker, toolMarker, bigToolMarker, responseMarker}

const encScript = `{"repeat":true,"turns":[
  {"tool_calls":[{"id":"n","name":"read_file","arguments":{"path":"notes.txt"}},
                 {"id":"b","name":"read_file","arguments":{"path":"big.txt"}}]},
  {"text":["the answer is ` + responseMarker + `"]}]}`

// encFixture is what the encryption tests run on: a file content store
// in a directory of the test's, and the built-in tools over a workspace
// whose notes.txt (small, kept inline) and big.txt (64 KiB, offloaded)
// carry the tool markers.
func encFixture(t *testing.T, ctx context.Context) (storeDir string, st *store.Store, tools *tool.Registry) {
	t.Helper()
	storeDir = t.TempDir()
	st, err := store.Open(ctx, "file://"+storeDir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	workspace := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(workspace, "notes.txt"), []byte("notes: "+toolMarker), 0o600))
	big := strings.Repeat(bigToolMarker+" ", 64<<10/len(bigToolMarker))
	require.NoError(t, os.WriteFile(filepath.Join(workspace, "big.txt"), []byte(big), 0o600))
	tools, err = tool.Builtins(workspace)
	require.NoError(t, err)
	return storeDir, st, tools
}

// writeKeyFile writes a key file of the given IDs, each with a fresh key
// unless keys already holds one, and returns its path.
func writeKeyFile(t *testing.T, keys map[string]string, ids ...string) string {
	t.Helper()
	var lines []string
	for _, id := range ids {
		if keys[id] == "" {
			k := make([]byte, crypt.KeySize)
			_, err := rand.Read(k)
			require.NoError(t, err)
			keys[id] = base64.StdEncoding.EncodeToString(k)
		}
		lines = append(lines, id+" "+keys[id])
	}
	path := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	return path
}

// encStack is a worker and a client that encrypt with the keys in a key
// file, over one content store.
type encStack struct {
	codec *store.Codec
	dc    converter.DataConverter
	w     interface{ Stop() }
	c     *client.Client
}

func startEncStack(t *testing.T, ctx context.Context, srv *devserver.Server, st *store.Store, keyFile string, tools *tool.Registry) *encStack {
	t.Helper()
	keys, err := crypt.LoadKeyFile(keyFile)
	require.NoError(t, err)
	s := &encStack{codec: store.NewCodec(st, store.CodecOptions{Encryption: crypt.NewCodec(keys)})}
	s.dc = store.NewDataConverter(s.codec)
	tc, err := srv.Dial(ctx, sdkclient.Options{DataConverter: s.dc})
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	w, err := worker.New(tc, worker.Options{Models: keeltest.ScriptModels(t, encScript), Tools: tools,
		Codec: s.codec, StopTimeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	s.w = w
	s.c, err = client.Dial(ctx, client.Options{Temporal: tc, DataConverter: s.dc,
		Config: api.RunConfig{Tools: []string{"read_file"}}})
	require.NoError(t, err)
	return s
}

// rawHistories returns every history of the namespace as a client without
// any codec sees it (as the temporal CLI does without --codec-endpoint),
// keyed "workflow/execution". Each listed workflow's executions are read
// back from its current one (each execution's first event names the one
// it continued), so none is missed while visibility catches up.
func rawHistories(t *testing.T, ctx context.Context, srv *devserver.Server) map[string][]*historypb.HistoryEvent {
	t.Helper()
	plain, err := srv.Dial(ctx, sdkclient.Options{})
	require.NoError(t, err)
	defer plain.Close()
	list, err := plain.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: srv.Namespace()})
	require.NoError(t, err)
	out := map[string][]*historypb.HistoryEvent{}
	read := func(workflowID, execution string) (previous string) {
		id := workflowID + "/" + execution
		if _, done := out[id]; done {
			return ""
		}
		it := plain.GetWorkflowHistory(ctx, workflowID, execution, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
				previous = a.GetContinuedExecutionRunId()
			}
			out[id] = append(out[id], ev)
		}
		return previous
	}
	for _, ex := range list.GetExecutions() {
		id := ex.GetExecution().GetWorkflowId()
		d, err := plain.DescribeWorkflowExecution(ctx, id, "")
		require.NoError(t, err)
		for execution := d.GetWorkflowExecutionInfo().GetExecution().GetRunId(); execution != ""; {
			execution = read(id, execution)
		}
	}
	return out
}

// payloadsOf returns the payloads of ev outside search attributes (which
// Temporal indexes and no codec touches; keel's hold IDs, states and model
// names only).
func payloadsOf(t *testing.T, ev *historypb.HistoryEvent) []*commonpb.Payload {
	t.Helper()
	var out []*commonpb.Payload
	require.NoError(t, protorange.Range(ev.ProtoReflect(), func(v protopath.Values) error {
		for _, step := range v.Path {
			if step.Kind() == protopath.FieldAccessStep && step.FieldDescriptor().Name() == "search_attributes" {
				return protorange.Break
			}
		}
		if m, ok := v.Index(-1).Value.Interface().(protoreflect.Message); ok {
			if pl, ok := m.Interface().(*commonpb.Payload); ok {
				out = append(out, pl)
			}
		}
		return nil
	}))
	return out
}

// Every payload keel writes is encrypted: the raw histories (what the
// temporal CLI prints without a codec) and the content store's objects
// hold none of the prompt, the tool results or the model's answer; keel's
// client, and any reader of the codec endpoint, sees them all. After a
// key rotation new payloads use the new key and old ones still read; a
// reader without the old key fails with an error naming its ID.
func TestEncryptionAtRest(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	srv := keeltest.StartServer(t, devserver.Config{})
	storeDir, st, tools := encFixture(t, ctx)

	keys := map[string]string{}
	first := startEncStack(t, ctx, srv, st, writeKeyFile(t, keys, "k1"), tools)
	sess := first.c.Session("encrypted")
	run, err := sess.Send(ctx, "please look "+promptMarker)
	require.NoError(t, err)
	out, err := run.Outcome(ctx)
	require.NoError(t, err)
	require.Contains(t, out.Text, responseMarker)

	// What the server keeps: no marker in any event, every payload (but
	// search attributes) encrypted or a reference to ciphertext.
	// The run executed in the session's own workflow (an inline session),
	// which continued as new once it committed: the run's execution and
	// the one waiting for the next prompt.
	runExecution(t, ctx, first.c.Temporal(), sess.ID(), run.Number)
	histories := rawHistories(t, ctx, srv)
	require.GreaterOrEqual(t, len(histories), 2, "the run's execution of the session and the next")
	counts := map[string]int{}
	var sample *commonpb.Payload
	for id, events := range histories {
		for _, ev := range events {
			raw, err := proto.Marshal(ev)
			require.NoError(t, err)
			for _, m := range encMarkers {
				require.False(t, bytes.Contains(raw, []byte(m)), "%s event %d (%s) holds %s", id, ev.GetEventId(), ev.GetEventType(), m)
			}
			for _, p := range payloadsOf(t, ev) {
				switch {
				case crypt.IsEncrypted(p):
					counts["encrypted"]++
					require.Equal(t, "k1", crypt.KeyID(p))
					if sample == nil {
						sample = p
					}
				case claimcheck.IsReference(p):
					counts["reference"]++
				default:
					t.Errorf("%s event %d (%s): a payload in the clear: %v", id, ev.GetEventId(), ev.GetEventType(), p.GetMetadata())
				}
			}
		}
	}
	t.Logf("raw histories: %d executions, payloads %v", len(histories), counts)
	require.Positive(t, counts["reference"], "the big result was offloaded")
	// A reader without the codec gets ciphertext it cannot decode.
	var s string
	require.Error(t, converter.GetDefaultDataConverter().FromPayload(sample, &s))

	objects := 0
	require.NoError(t, filepath.WalkDir(storeDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, m := range encMarkers {
			require.False(t, bytes.Contains(b, []byte(m)), "store object %s holds %s", path, m)
		}
		objects++
		return nil
	}))
	require.Positive(t, objects)

	// keel's client decodes everything.
	requireMarkersInLog(t, ctx, first.c, "encrypted", encMarkers...)

	// So does a reader that only reaches the codec endpoint (the Web UI,
	// temporal --codec-endpoint): decode every raw payload through it.
	endpoint := httptest.NewServer(first.codec.Handler(store.HandlerOptions{}))
	defer endpoint.Close()
	remote := claimcheck.NewRemoteCodec(endpoint.URL, claimcheck.RemoteOptions{})
	var decoded bytes.Buffer
	for _, events := range histories {
		for _, ev := range events {
			ps := payloadsOf(t, ev)
			if len(ps) == 0 {
				continue
			}
			dec, err := remote.Decode(ps)
			require.NoError(t, err)
			for _, p := range dec {
				require.False(t, crypt.IsEncrypted(p) || claimcheck.IsReference(p))
				decoded.Write(p.GetData())
			}
		}
	}
	for _, m := range encMarkers {
		require.Contains(t, decoded.String(), m, "the codec endpoint decodes %s", m)
	}

	// Rotation: k2 is current, k1 stays readable. A second run writes
	// with k2; the session's older payloads (k1) still replay and read.
	first.w.Stop()
	rotated := startEncStack(t, ctx, srv, st, writeKeyFile(t, keys, "k2", "k1"), tools)
	run2, err := rotated.c.Session("encrypted").Send(ctx, "again "+promptMarker)
	require.NoError(t, err)
	_, err = run2.Outcome(ctx)
	require.NoError(t, err)
	requireMarkersInLog(t, ctx, rotated.c, "encrypted", encMarkers...)
	ids := map[string]int{}
	for _, events := range rawHistories(t, ctx, srv) {
		for _, ev := range events {
			for _, p := range payloadsOf(t, ev) {
				if crypt.IsEncrypted(p) {
					ids[crypt.KeyID(p)]++
				}
			}
		}
	}
	t.Logf("payloads by key after rotation: %v", ids)
	require.Positive(t, ids["k1"])
	require.Positive(t, ids["k2"])

	// Without k1, its payloads are an error that names the key.
	onlyNew := crypt.NewCodec(mustKeys(t, writeKeyFile(t, keys, "k2")))
	_, err = onlyNew.Decode([]*commonpb.Payload{sample})
	require.ErrorIs(t, err, crypt.ErrUnknownKey)
	require.ErrorContains(t, err, `"k1"`)
	require.NotContains(t, err.Error(), keys["k1"])
	require.NotContains(t, err.Error(), keys["k2"])
}

func mustKeys(t *testing.T, path string) *crypt.Keyring {
	t.Helper()
	k, err := crypt.LoadKeyFile(path)
	require.NoError(t, err)
	return k
}

// requireMarkersInLog reads the session's log through c and requires each
// marker somewhere in it.
func requireMarkersInLog(t *testing.T, ctx context.Context, c *client.Client, session string, markers ...string) {
	t.Helper()
	log, err := c.Session(session).EventsAfter(ctx, 0)
	require.NoError(t, err)
	var all strings.Builder
	for _, ev := range log {
		all.Write(ev.Data)
		if ev.Type == keel.TypeToolFinished {
			all.WriteString(decode[keel.ToolFinished](ev).Output)
		}
	}
	for _, m := range markers {
		require.Contains(t, all.String(), m, "the log read through the codec shows %s", m)
	}
}
