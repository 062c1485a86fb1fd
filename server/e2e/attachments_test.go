package e2e_test

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/provider/anthropic"
	"github.com/keelrun/keel/server/provider/providertest"
	"github.com/keelrun/keel/server/worker"
)

// photo is a PNG of noise (so it does not compress): w×h pixels.
func photo(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(1, 2))
	for i := range img.Pix {
		img.Pix[i] = uint8(r.IntN(256))
	}
	img.Set(0, 0, color.RGBA{A: 255})
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return b.Bytes()
}

// An image through the whole path: the client stores it, the send carries
// its reference, the worker reads it back and Anthropic's request carries
// its bytes, and the session's transcript keeps the reference. The
// histories hold the reference only: they grow by a few hundred bytes,
// not by the image.
func TestImageThroughTheWholePath(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	img := photo(t, 300, 200)
	backend := providertest.NewServer(t,
		providertest.SSE(t, "../provider/anthropic/testdata/text.sse"), providertest.SSE(t, "../provider/anthropic/testdata/text.sse"))
	claude, err := anthropic.New(anthropic.Config{BaseURL: backend.URL, APIKey: "sk-ant-test"})
	require.NoError(t, err)
	models := &worker.Models{Named: map[string]worker.NamedModel{"claude": {Provider: claude, Model: "claude-sonnet-4-5"}}}

	historyBytes := func(withImage bool) (int, *client.Session, keel.Attachment) {
		srv := keeltest.StartServer(t, devserver.Config{})
		keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: models})
		c := keeltest.Client(t, srv, nil)
		sess := c.Session("looks")
		opts := []client.SendOption{client.WithConfig(api.RunConfig{Model: "claude", Tools: []string{}})}
		var att keel.Attachment
		if withImage {
			var err error
			att, err = c.Attach(ctx, "noise.png", "image/png", img)
			require.NoError(t, err)
			opts = append(opts, client.WithAttachments(att))
		}
		run, err := sess.Send(ctx, "What is in the picture?", opts...)
		require.NoError(t, err)
		_, err = run.Outcome(ctx)
		require.NoError(t, err)
		runExecution(t, ctx, c.Temporal(), sess.ID(), run.Number)
		n := 0
		for _, events := range rawHistories(t, ctx, srv) {
			for _, ev := range events {
				raw, err := proto.Marshal(ev)
				require.NoError(t, err)
				require.False(t, bytes.Contains(raw, img[len(img)/2:len(img)/2+64]), "a history holds the image's bytes")
				n += len(raw)
			}
		}
		return n, sess, att
	}
	plain, _, _ := historyBytes(false)
	with, sess, att := historyBytes(true)

	require.Equal(t, 2, backend.Count())
	body := backend.Last().Body
	require.True(t, bytes.Contains(body, []byte(base64.StdEncoding.EncodeToString(img))), "the request carries the image")
	page, err := sess.History(ctx, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []keel.Attachment{att}, page.Messages[0].Attachments, "the transcript keeps the reference")
	t.Logf("image %d bytes (request body %d bytes); histories %d bytes without it, %d with it (+%d)",
		len(img), len(body), plain, with, with-plain)
	require.Less(t, with-plain, 2048, "the histories grew by the reference, not the image")
}
