package client

import (
	"fmt"

	historypb "go.temporal.io/api/history/v1"

	"github.com/keelrun/keel/crypt"
)

// v0.1.0: a worker of keel v0.1.0 answers the events query without
// naming a workflow task (api.EventsPage.Task); what it committed is what
// its sessions' commit markers say: side-effect markers whose value is
// {"keel_seq": N}, recorded in the task that recorded the events. This
// reading can go once no worker of v0.1.0 answers queries.

// markedSeq reads a commit marker of keel v0.1.0's shape: the sequence it
// records, and whether m is one. Its payload is decoded through the
// client's data converter, so an encrypted one is read too, and one the
// client cannot decrypt fails rather than hold every read back.
func (c *Client) markedSeq(m *historypb.MarkerRecordedEventAttributes) (int64, bool, error) {
	data := m.GetDetails()["data"].GetPayloads()
	if m.GetMarkerName() != "SideEffect" || len(data) != 1 {
		return 0, false, nil
	}
	var v struct {
		KeelSeq *int64 `json:"keel_seq"`
	}
	if err := c.dc.FromPayload(data[0], &v); err != nil {
		if crypt.IsEncrypted(data[0]) {
			return 0, false, fmt.Errorf("keel: read a commit marker: %w", err)
		}
		return 0, false, nil // another side effect
	}
	if v.KeelSeq == nil {
		return 0, false, nil
	}
	return *v.KeelSeq, true, nil
}
