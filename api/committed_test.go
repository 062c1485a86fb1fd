package api_test

import (
	"os"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel/api"
)

// The committed markers of a recorded Session history read back with
// CommittedSeq, rising as the run's events are recorded: the encoding it
// documents is the one the workflows write.
func TestCommittedSeqReadsRecordedMarkers(t *testing.T) {
	f, err := os.Open("../server/workflows/testdata/session_run_tools.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := sdkclient.HistoryFromJSON(f, sdkclient.HistoryJSONOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, ev := range h.GetEvents() {
		if seq, ok := api.CommittedSeq(ev.GetMarkerRecordedEventAttributes()); ok {
			seqs = append(seqs, seq)
		}
	}
	if len(seqs) < 2 {
		t.Fatalf("found %d committed markers, want one per workflow task that recorded events", len(seqs))
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Errorf("committed sequence went from %d to %d", seqs[i-1], seqs[i])
		}
	}
}

// Markers that are not keel's committed marker are not read as one.
func TestCommittedSeqIgnoresOtherMarkers(t *testing.T) {
	payload := func(enc, data string) *commonpb.Payloads {
		return &commonpb.Payloads{Payloads: []*commonpb.Payload{{
			Metadata: map[string][]byte{"encoding": []byte(enc)}, Data: []byte(data)}}}
	}
	for name, m := range map[string]*historypb.MarkerRecordedEventAttributes{
		"version marker":      {MarkerName: "Version", Details: map[string]*commonpb.Payloads{"data": payload("json/plain", `{"keel_seq":3}`)}},
		"other side effect":   {MarkerName: "SideEffect", Details: map[string]*commonpb.Payloads{"data": payload("json/plain", `{"key":"x"}`)}},
		"claim-check payload": {MarkerName: "SideEffect", Details: map[string]*commonpb.Payloads{"data": payload("keel/claim-check", `{"keel_seq":3}`)}},
		"no details":          {MarkerName: "SideEffect"},
	} {
		if seq, ok := api.CommittedSeq(m); ok {
			t.Errorf("%s read as committed sequence %d", name, seq)
		}
	}
	good := &historypb.MarkerRecordedEventAttributes{MarkerName: "SideEffect",
		Details: map[string]*commonpb.Payloads{"data": payload("json/plain", `{"keel_seq":7}`)}}
	if seq, ok := api.CommittedSeq(good); !ok || seq != 7 {
		t.Errorf("CommittedSeq = %d, %v; want 7, true", seq, ok)
	}
}
