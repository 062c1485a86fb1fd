package workflows_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/workflows"
)

// attachmentStore keeps attachments in memory, keyed by their hash.
type attachmentStore struct {
	mu    sync.Mutex
	items map[string][2]string // media type, data
}

func (s *attachmentStore) StoreAttachment(_ context.Context, mediaType string, data []byte) (string, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := sha256.Sum256(data)
	key := "sha256:" + hex.EncodeToString(sum[:])
	if s.items == nil {
		s.items = map[string][2]string{}
	}
	s.items[key] = [2]string{mediaType, string(data)}
	return key, int64(len(data)), nil
}

func (s *attachmentStore) ReadAttachment(_ context.Context, key string, _ int64) (string, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.items[key]
	if !ok {
		return "", nil, errors.New("not stored")
	}
	return it[0], []byte(it[1]), nil
}

// A prompt's attachments enter the transcript by reference on its user
// message, and a tool's files on its tool message; every request is
// handed their bytes. Attachments that are not references keel takes, or
// of kinds the model cannot read, are refused at send.
func TestAttachmentsEnterTheTranscript(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, image.NewGray(image.Rect(0, 0, 3, 3))))
	img := b.Bytes()
	store := &attachmentStore{}
	key, size, _ := store.StoreAttachment(context.Background(), "image/png", img)
	att := keel.Attachment{Kind: keel.AttachmentImage, MediaType: "image/png", Name: "dot.png", Key: key, Size: size, Bytes: int64(len(img))}
	shows := tool.Func("shows", "Shows a chart.", nil, func(context.Context, json.RawMessage) (tool.Result, error) {
		return tool.Result{Output: "the chart", Files: []tool.File{{Name: "chart.png", MediaType: "image/png", Data: img}}}, nil
	})
	rules := workflows.Rules{CheckInputs: func(spec string, kinds []keel.AttachmentKind) error {
		if spec == "scripted:text" {
			return keel.Errorf(keel.CodeInvalidInput, "attachments: text reads none")
		}
		return nil
	}}
	env := newRulesEnv(t, `{"turns":[{"tool_calls":[{"id":"c1","name":"shows","arguments":{}}]},{"text":["A dot and a chart."]}]}`, rules, shows)
	env.acts.Attachments = store
	reqs := &requestLog{Provider: env.acts.Models.(scriptModels).p}
	env.acts.Models = scriptModels{reqs}
	u := newUpdates(t, env)
	forged := att
	forged.Key = "../../etc/passwd"
	env.RegisterDelayedCallback(func() {
		u.send(api.UpdateSend, "forged", api.SendRequest{Prompt: "a", Attachments: []keel.Attachment{forged}})
		u.send(api.UpdateSend, "unread", api.SendRequest{Prompt: "b", Attachments: []keel.Attachment{att},
			Config: &api.RunConfig{Model: "scripted:text"}})
		u.send(api.UpdateSend, "ok", api.SendRequest{Prompt: "What is this?", Attachments: []keel.Attachment{att},
			Config: &api.RunConfig{Model: "scripted:test", Tools: []string{"shows"}}})
	}, 0)
	env.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", api.RunConfig{}))
	c := continuedAs(t, env).Carry

	require.Equal(t, keel.CodeInvalidInput, u.refusal("forged").Code)
	require.Contains(t, u.refusal("forged").Message, "not a reference to a stored attachment")
	require.Equal(t, "attachments: text reads none", u.refusal("unread").Message)
	require.Equal(t, 1, c.Runs)
	require.Equal(t, "A dot and a chart.", c.Last.Text)

	require.Equal(t, []keel.Attachment{att}, c.Transcript[0].Attachments, "the prompt's reference, without its bytes")
	tm := c.Transcript[2]
	require.Equal(t, keel.RoleTool, tm.Role)
	require.Len(t, tm.Attachments, 1)
	require.Equal(t, "chart.png", tm.Attachments[0].Name)
	require.Equal(t, key, tm.Attachments[0].Key, "the same bytes, the same key")
	require.Nil(t, tm.Attachments[0].Data)

	require.Len(t, reqs.reqs, 2)
	require.Equal(t, img, reqs.reqs[0].Messages[0].Attachments[0].Data, "the request has the bytes")
	require.Equal(t, img, reqs.reqs[1].Messages[2].Attachments[0].Data, "and the tool's")
}
