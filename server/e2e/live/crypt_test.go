package live_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/crypt"
	"github.com/keelrun/keel/internal/livetest"
	"github.com/keelrun/keel/live"
)

func testCodec(t testing.TB, id string, fill byte) *crypt.Codec {
	t.Helper()
	return crypt.NewCodec(crypt.NewKeyring(id, bytes.Repeat([]byte{fill}, crypt.KeySize)))
}

// reasonCounter counts OnReject's reasons.
type reasonCounter struct {
	mu sync.Mutex
	n  map[live.Reason]int
}

func (c *reasonCounter) add(r live.Reason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[live.Reason]int{}
	}
	c.n[r]++
}

func (c *reasonCounter) get(r live.Reason) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[r]
}

const secretText = "the prompt's secret answer"

func secretDelta(sessionID string) keel.Envelope {
	env := livetest.Delta(sessionID, 1)
	env.Data = []byte(`{"step":1,"attempt":0,"text":"` + secretText + `"}`)
	return env
}

// With encryption on, what crosses NATS is ciphertext under the current
// key: a raw subscriber on every subject sees neither a delta's text nor
// its type, and a subscriber with the keys gets the envelope back intact.
func TestNATSEncryptedTrafficHoldsNoText(t *testing.T) {
	srv := startNATSServer(t)
	codec := testCodec(t, "k1", 1)
	raw := connect(t, srv.ClientURL())
	rawSub, err := raw.SubscribeSync(">")
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	pub := dialNATS(t, srv.ClientURL(), live.NATSOptions{Encryption: codec})
	sub := livetest.Subscribe(t, dialNATS(t, srv.ClientURL(), live.NATSOptions{Encryption: testCodec(t, "k1", 1)}), "s1", 0)
	want := secretDelta("s1")
	if err := pub.Publish(t.Context(), want); err != nil {
		t.Fatal(err)
	}
	got, err := sub.Next(livetest.GuardCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Data) != string(want.Data) || got.Type != want.Type || got.RunID != want.RunID || got.AfterSeq != want.AfterSeq {
		t.Errorf("decrypted %+v, want %+v", got, want)
	}

	for {
		m, err := rawSub.NextMsg(livetest.Guard)
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != live.Subject(live.DefaultPrefix, "s1") {
			continue // the subscription's own traffic
		}
		wire := string(m.Data) + " " + strings.Join(m.Header.Values(headerLive), " ")
		for _, leak := range []string{secretText, base64.StdEncoding.EncodeToString([]byte(secretText)), keel.TypeTextDelta, `"text"`} {
			if strings.Contains(wire, leak) {
				t.Errorf("the wire holds %q: %q", leak, wire)
			}
		}
		var p commonpb.Payload
		if err := proto.Unmarshal(m.Data, &p); err != nil || !crypt.IsEncrypted(&p) || crypt.KeyID(&p) != "k1" {
			t.Errorf("the wire is not a payload encrypted with k1: %v %v", err, p.GetMetadata())
		}
		break
	}
}

// The attacks on an encrypted channel: a forged plaintext delta, one sealed
// with another key, one with its ciphertext altered, a payload sealed with
// the right key that is not a live event (a history payload), a real
// event replayed on another session's subject and on its own. Each is
// dropped for its reason; only the real events arrive, each once.
func TestNATSEncryptedChannelRefusesForgeries(t *testing.T) {
	srv := startNATSServer(t)
	codec := testCodec(t, "k1", 1)
	var reasons reasonCounter
	ch := dialNATS(t, srv.ClientURL(), live.NATSOptions{Encryption: codec, OnReject: reasons.add})
	sub1 := livetest.Subscribe(t, ch, "s1", 0)
	sub2 := livetest.Subscribe(t, ch, "s2", 0)

	// Capture what an honest publisher sends, to replay it.
	raw := connect(t, srv.ClientURL())
	capture, err := raw.SubscribeSync(live.Subject(live.DefaultPrefix, "s1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	pub := dialNATS(t, srv.ClientURL(), live.NATSOptions{Encryption: codec})
	livetest.Publish(t, pub, "s1", 1, 1)
	livetest.Expect(t, sub1, livetest.Events(1, 1))
	real, err := capture.NextMsg(livetest.Guard)
	if err != nil {
		t.Fatal(err)
	}

	send := func(subject string, data []byte) {
		t.Helper()
		m := nats.NewMsg(subject)
		m.Header.Set(headerLive, "forger 1")
		m.Data = data
		if err := raw.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	plain, _ := json.Marshal(livetest.Delta("s1", 100))
	otherWire := sealed(t, srv.ClientURL(), testCodec(t, "k1", 2), livetest.Delta("s1", 100))
	altered := bytes.Clone(real.Data)
	altered[len(altered)-1] ^= 1
	history, err := codec.Encode([]*commonpb.Payload{{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte("json/plain")}, Data: plain}})
	if err != nil {
		t.Fatal(err)
	}
	historyWire, _ := proto.Marshal(history[0])

	send(live.Subject(live.DefaultPrefix, "s1"), plain)              // plaintext
	send(live.Subject(live.DefaultPrefix, "s1"), otherWire)          // another key under the same ID
	send(live.Subject(live.DefaultPrefix, "s1"), altered)            // altered ciphertext
	send(live.Subject(live.DefaultPrefix, "s1"), historyWire)        // sealed, but not an event
	send(live.Subject(live.DefaultPrefix, "s2"), real.Data)          // s1's event on s2
	send(live.Subject(live.DefaultPrefix, "s1"), real.Data)          // a replay
	send(live.Subject(live.DefaultPrefix, "s1"), []byte("\x0a\x00")) // a payload of nothing
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	livetest.Publish(t, pub, "s1", 2, 2)
	livetest.Publish(t, pub, "s2", 3, 3)
	livetest.Expect(t, sub1, livetest.Events(2, 2))
	livetest.Expect(t, sub2, livetest.Events(3, 3))
	livetest.ExpectNothing(t, sub1)
	for r, n := range map[live.Reason]int{live.ReasonPlaintext: 1, live.ReasonDecrypt: 2, live.ReasonMalformed: 2, live.ReasonSession: 1} {
		if got := reasons.get(r); got != n {
			t.Errorf("%s rejections = %d, want %d", r, got, n)
		}
	}
	if got := ch.Rejected(); got != 6 {
		t.Errorf("Rejected() = %d, want 6 (the replay is a repeat, not a rejection)", got)
	}
}

// AcceptPlaintext (a migration) lets plaintext events in beside encrypted
// ones; a subscriber without keys drops encrypted events and says why.
func TestNATSPlaintextAndKeylessSubscribers(t *testing.T) {
	srv := startNATSServer(t)
	codec := testCodec(t, "k1", 1)
	migrating := dialNATS(t, srv.ClientURL(), live.NATSOptions{Encryption: codec, AcceptPlaintext: true})
	var keylessReasons reasonCounter
	keyless := dialNATS(t, srv.ClientURL(), live.NATSOptions{OnReject: keylessReasons.add})
	subM := livetest.Subscribe(t, migrating, "s1", 0)
	subK := livetest.Subscribe(t, keyless, "s1", 0)
	encrypted := dialNATS(t, srv.ClientURL(), live.NATSOptions{Encryption: codec})
	clear := dialNATS(t, srv.ClientURL(), live.NATSOptions{})

	livetest.Publish(t, encrypted, "s1", 1, 1)
	if err := encrypted.Flush(livetest.GuardCtx(t)); err != nil {
		t.Fatal(err)
	}
	livetest.Publish(t, clear, "s1", 2, 2)
	livetest.Expect(t, subM, livetest.Events(1, 2))
	livetest.Expect(t, subK, livetest.Events(2, 2))
	if got := keylessReasons.get(live.ReasonEncrypted); got != 1 {
		t.Errorf("keyless subscriber: %d encrypted rejections, want 1", got)
	}
}

// decoderFunc is a converter.PayloadCodec over a Decode function: a
// stand-in for a codec endpoint.
type decoderFunc func([]*commonpb.Payload) ([]*commonpb.Payload, error)

func (f decoderFunc) Encode(p []*commonpb.Payload) ([]*commonpb.Payload, error) { return p, nil }
func (f decoderFunc) Decode(p []*commonpb.Payload) ([]*commonpb.Payload, error) { return f(p) }

// A subscriber without keys decodes encrypted events through a Decoder (a
// codec endpoint that has them) in batches: a burst costs fewer calls
// than events, order and counters hold, plaintext events go through
// without a call, and a forged event in a batch costs only itself.
func TestNATSDecoderDecodesInBatches(t *testing.T) {
	srv := startNATSServer(t)
	codec := testCodec(t, "k1", 1)
	var calls atomic.Int64
	release := make(chan struct{})
	var once sync.Once
	entered := make(chan struct{})
	dec := decoderFunc(func(p []*commonpb.Payload) ([]*commonpb.Payload, error) {
		calls.Add(1)
		once.Do(func() {
			close(entered)
			<-release // hold the first call so that the rest queue up
		})
		return codec.Decode(p)
	})
	var reasons reasonCounter
	ch := dialNATS(t, srv.ClientURL(), live.NATSOptions{Decoder: dec, OnReject: reasons.add})
	sub := livetest.Subscribe(t, ch, "s1", 0)
	pub := dialNATS(t, srv.ClientURL(), live.NATSOptions{Encryption: codec})
	clear := dialNATS(t, srv.ClientURL(), live.NATSOptions{})

	livetest.Publish(t, pub, "s1", 1, 1)
	livetest.Wait(t, entered, "the first decode")
	livetest.Publish(t, pub, "s1", 2, 100)
	if err := pub.Flush(livetest.GuardCtx(t)); err != nil {
		t.Fatal(err)
	}
	raw := connect(t, srv.ClientURL())
	forged := sealed(t, srv.ClientURL(), codec, livetest.Delta("s1", 7))
	forged[len(forged)-1] ^= 1
	if err := raw.Publish(live.Subject(live.DefaultPrefix, "s1"), forged); err != nil {
		t.Fatal(err)
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	livetest.Publish(t, pub, "s1", 101, 110)
	if err := pub.Flush(livetest.GuardCtx(t)); err != nil {
		t.Fatal(err)
	}
	// Everything is at the subscriber's connection once it answers a ping.
	if err := ch.Conn().FlushWithContext(livetest.GuardCtx(t)); err != nil {
		t.Fatal(err)
	}
	close(release)
	livetest.Expect(t, sub, livetest.Events(1, 110))
	livetest.Publish(t, clear, "s1", 111, 111)
	livetest.Expect(t, sub, livetest.Events(111, 111))
	if n := calls.Load(); n > 20 {
		t.Errorf("%d Decode calls for 110 events: not batched", n)
	}
	if got := reasons.get(live.ReasonDecrypt); got != 1 {
		t.Errorf("decrypt rejections = %d, want 1", got)
	}
}

// A Decoder that cannot be reached drops what it could not decode, and
// the subscription goes on.
func TestNATSDecoderFailureDropsTheBatch(t *testing.T) {
	srv := startNATSServer(t)
	codec := testCodec(t, "k1", 1)
	var fail atomic.Bool
	fail.Store(true)
	dec := decoderFunc(func(p []*commonpb.Payload) ([]*commonpb.Payload, error) {
		if fail.Load() {
			return nil, errors.New("endpoint down")
		}
		return codec.Decode(p)
	})
	var rejected atomic.Int64
	handled := make(chan struct{}, 16)
	ch := dialNATS(t, srv.ClientURL(), live.NATSOptions{Decoder: dec, OnReject: func(live.Reason) { rejected.Add(1) }})
	sub := livetest.Subscribe(t, watched{ch, func() { handled <- struct{}{} }}, "s1", 0)
	pub := dialNATS(t, srv.ClientURL(), live.NATSOptions{Encryption: codec})
	livetest.Publish(t, pub, "s1", 1, 1)
	livetest.Wait(t, handled, "the first event to be handled")
	fail.Store(false)
	livetest.Publish(t, pub, "s1", 2, 2)
	// Event 1 was lost on the way (its stream's next event says so once
	// its counter is known).
	livetest.Expect(t, sub, []livetest.Step{{Event: 2}})
	if rejected.Load() != 1 {
		t.Errorf("rejected %d, want 1", rejected.Load())
	}
}

// sealed returns env as a channel encrypting with codec sends it: a
// channel of another prefix publishes it, where only a raw subscriber
// listens.
func sealed(t *testing.T, url string, codec *crypt.Codec, env keel.Envelope) []byte {
	t.Helper()
	raw := connect(t, url)
	capture, err := raw.SubscribeSync(live.Subject("capture", env.SessionID))
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := dialNATS(t, url, live.NATSOptions{Prefix: "capture", Encryption: codec}).Publish(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	m, err := capture.NextMsg(livetest.Guard)
	if err != nil {
		t.Fatal(err)
	}
	return m.Data
}

// Publish refuses an event over the size bound, typed, and sends nothing.
func TestNATSPublishRefusesOversizedEvents(t *testing.T) {
	srv := startNATSServer(t)
	pub := dialNATS(t, srv.ClientURL(), live.NATSOptions{MaxEventBytes: 1 << 10})
	sub := livetest.Subscribe(t, dialNATS(t, srv.ClientURL(), live.NATSOptions{MaxEventBytes: 1 << 10}), "s1", 0)
	err := pub.Publish(context.Background(), livetest.PaddedDelta("s1", 1, 2<<10))
	var re *live.RejectError
	if !errors.As(err, &re) || re.Reason != live.ReasonTooLarge || !errors.Is(err, keel.ErrInvalidInput) {
		t.Fatalf("Publish of 2 KiB with a 1 KiB bound = %v, want a too_large rejection", err)
	}
	livetest.Publish(t, pub, "s1", 2, 2)
	livetest.Expect(t, sub, livetest.Events(2, 2))
}
