package client

import (
	"context"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/internal/carry"
)

// A hand-over's carried state is delivered only when it holds the whole
// log after the reader's cursor. Anything else (a payload that does not
// decode, no carried state, a gap, a log short of its sequence) delivers
// nothing, and the reader asks the closed execution instead
// (docs/contract.md §14.2).
func TestCarriedStateIsDeliveredOnlyWhole(t *testing.T) {
	dc := converter.GetDefaultDataConverter()
	ev := func(seq int64) keel.Envelope {
		return keel.Envelope{Seq: seq, SessionID: "s", RunID: "s/run-1", Type: keel.TypeStepStarted}
	}
	handed := func(seq int64, tail ...keel.Envelope) *commonpb.Payloads {
		p, err := dc.ToPayloads(carry.SessionInput{SessionID: "s", Carry: &carry.SessionCarry{Seq: seq, Tail: tail}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	noCarry, err := dc.ToPayloads(carry.SessionInput{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	notJSON := &commonpb.Payloads{Payloads: []*commonpb.Payload{{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON)}, Data: []byte(`{"carry":`)}}}
	for _, tc := range []struct {
		name  string
		input *commonpb.Payloads
		after int64
		ok    bool
		want  int
	}{
		{"whole", handed(3, ev(1), ev(2), ev(3)), 1, true, 2},
		{"nothing after the cursor", handed(3, ev(1), ev(2), ev(3)), 3, true, 0},
		{"a gap", handed(3, ev(1), ev(3)), 1, false, 0},
		{"short of its sequence", handed(4, ev(1), ev(2), ev(3)), 1, false, 0},
		{"out of order", handed(3, ev(1), ev(3), ev(2)), 1, false, 0},
		{"no carried state", noCarry, 0, false, 0},
		{"not JSON", notJSON, 0, false, 0},
		{"no payload", nil, 0, false, 0},
	} {
		f := &follower{c: &Client{dc: dc}, session: "s", after: tc.after}
		var got []int64
		ok, err := f.readCarried(context.Background(), tc.input, func(ev keel.Envelope) error {
			got = append(got, ev.Seq)
			return nil
		})
		if err != nil || ok != tc.ok || len(got) != tc.want {
			t.Errorf("%s: ok %v, delivered %v (%v); want ok %v and %d events", tc.name, ok, got, err, tc.ok, tc.want)
		}
		for i, seq := range got {
			if seq != tc.after+int64(i)+1 {
				t.Errorf("%s: delivered %v; want the events after %d in order", tc.name, got, tc.after)
			}
		}
	}
}
