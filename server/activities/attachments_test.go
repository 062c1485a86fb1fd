package activities_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"iter"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/scripted"
	"github.com/keelrun/keel/server/tool"
)

// pngBytes is a real 2×2 PNG.
func pngBytes(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, image.NewGray(image.Rect(0, 0, 2, 2))))
	return b.Bytes()
}

// memAttachments is a content store of attachments in memory.
type memAttachments struct {
	mu    sync.Mutex
	items map[string]memItem
	reads int
}

type memItem struct {
	mediaType string
	data      []byte
}

func (m *memAttachments) ReadAttachment(_ context.Context, key string, _ int64) (string, []byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	it, ok := m.items[key]
	if !ok {
		return "", nil, errors.New("no such object")
	}
	return it.mediaType, it.data, nil
}

func (m *memAttachments) StoreAttachment(_ context.Context, mediaType string, data []byte) (string, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := "sha256:" + strings.Repeat(string("0123456789abcdef"[len(m.items)%16]), 64)
	if m.items == nil {
		m.items = map[string]memItem{}
	}
	m.items[key] = memItem{mediaType, data}
	return key, int64(len(data)) + 10, nil
}

// seenRequests is a provider that keeps the requests it is sent.
type seenRequests struct {
	provider.Provider
	mu   sync.Mutex
	reqs []provider.Request
}

func (s *seenRequests) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	return s.Provider.Stream(ctx, req)
}

// A turn hands its provider every attachment's bytes, read once from the
// store and checked; a reference to a value stored as something else, or
// to nothing, fails the turn permanently before any request.
func TestModelTurnReadsAttachments(t *testing.T) {
	store := &memAttachments{}
	img := pngBytes(t)
	key, size, err := store.StoreAttachment(context.Background(), "image/png", img)
	require.NoError(t, err)
	badKey, badSize, _ := store.StoreAttachment(context.Background(), "image/png", []byte("not a png at all"))
	s, err := scripted.Parse([]byte(`{"repeat":true,"turns":[{"text":["seen"]}]}`))
	require.NoError(t, err)
	seen := &seenRequests{Provider: scripted.New(s)}
	env := newTurnEnv(&activities.Activities{Models: fixedModels{seen}, Attachments: store})
	att := keel.Attachment{Kind: keel.AttachmentImage, MediaType: "image/png", Name: "dot.png", Key: key, Size: size, Bytes: int64(len(img))}
	msg := keel.Message{Role: keel.RoleUser, Content: "what is this?", Attachments: []keel.Attachment{att}}
	for range 2 {
		_, err = env.ExecuteActivity(activities.ModelTurnName, turnInput(msg))
		require.NoError(t, err)
	}
	require.Len(t, seen.reqs, 2)
	require.Equal(t, img, seen.reqs[0].Messages[0].Attachments[0].Data)
	require.Equal(t, 1, store.reads, "the second turn read it from the worker's cache")
	require.Nil(t, msg.Attachments[0].Data, "the caller's message is left alone")

	for name, a := range map[string]keel.Attachment{
		"not a png":     {Kind: keel.AttachmentImage, MediaType: "image/png", Key: badKey, Size: badSize, Bytes: 16},
		"stored as png": {Kind: keel.AttachmentDocument, MediaType: "application/pdf", Key: key, Size: size, Bytes: int64(len(img))},
		"missing":       {Kind: keel.AttachmentImage, MediaType: "image/png", Key: "sha256:" + strings.Repeat("e", 64), Size: 9, Bytes: 9},
	} {
		m := keel.Message{Role: keel.RoleUser, Content: "x", Attachments: []keel.Attachment{a}}
		_, err := env.ExecuteActivity(activities.ModelTurnName, turnInput(m))
		f := turnFailure(t, err, keel.CodeProvider)
		require.NotNil(t, f.Provider, name)
		require.Equal(t, keel.ProviderInvalidRequest, f.Provider.Kind, name)
		require.False(t, f.Provider.Retryable, name)
		require.Contains(t, f.Provider.Message, "attachment 1 of message 1", name)
	}
	require.Len(t, seen.reqs, 2, "no request was sent for a bad attachment")
}

// A tool's images are stored and come back as references on its output;
// what keel does not take, or past the count, is left out with a note.
func TestToolFilesAreStored(t *testing.T) {
	store := &memAttachments{}
	img := pngBytes(t)
	files := []tool.File{{Name: "chart.png", MediaType: "image/png", Data: img}, {Name: "notes.txt", MediaType: "text/plain", Data: []byte("hi")}}
	for range keel.MaxAttachments {
		files = append(files, tool.File{Name: "more.png", MediaType: "image/png", Data: img})
	}
	shows := tool.Func("shows", "shows files", nil, func(context.Context, json.RawMessage) (tool.Result, error) {
		return tool.Result{Output: "here", Files: files}, nil
	})
	out := runToolWith(t, &activities.Activities{Tools: registryOf(t, shows), Attachments: store}, "shows")
	require.Len(t, out.Attachments, keel.MaxAttachments)
	require.Equal(t, keel.Attachment{Kind: keel.AttachmentImage, MediaType: "image/png", Name: "chart.png",
		Key: out.Attachments[0].Key, Size: int64(len(img)) + 10, Bytes: int64(len(img))}, out.Attachments[0])
	require.Contains(t, out.Output, "[notes.txt left out: attachment: media type \"text/plain\" is not one keel takes")
	require.Contains(t, out.Output, "[more.png left out: a result shows at most 8 files]")

	bare := runToolWith(t, &activities.Activities{Tools: registryOf(t, shows)}, "shows")
	require.Empty(t, bare.Attachments)
	require.Contains(t, bare.Output, "[chart.png left out: this worker has no content store]")
}

func registryOf(t *testing.T, tools ...tool.Tool) *tool.Registry {
	t.Helper()
	r, err := tool.NewRegistry(tools...)
	require.NoError(t, err)
	return r
}

// runToolWith runs one call of the named tool, without arguments.
func runToolWith(t *testing.T, acts *activities.Activities, name string) *activities.ToolOutput {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(acts.Tool, activity.RegisterOptions{Name: activities.ToolName})
	v, err := env.ExecuteActivity(activities.ToolName, activities.ToolInput{SessionID: "s1", RunID: "s1/run-1",
		Call: keel.ToolCall{ID: "c1", Name: name, Arguments: json.RawMessage(`{}`)}})
	require.NoError(t, err)
	var out activities.ToolOutput
	require.NoError(t, v.Get(&out))
	return &out
}
