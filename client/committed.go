package client

import (
	"fmt"

	historypb "go.temporal.io/api/history/v1"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/crypt"
)

// committedSeq reads a Committed marker (api.CommittedSeq), also when the
// workers encrypt what they write: such a marker's payload is decoded
// through the client's data converter, so a client that cannot decrypt
// it fails here rather than wait for a commit it cannot see.
func (c *Client) committedSeq(m *historypb.MarkerRecordedEventAttributes) (int64, bool, error) {
	if seq, ok := api.CommittedSeq(m); ok {
		return seq, true, nil
	}
	data := m.GetDetails()["data"].GetPayloads()
	if m.GetMarkerName() != "SideEffect" || len(data) != 1 || !crypt.IsEncrypted(data[0]) {
		return 0, false, nil
	}
	var v struct {
		KeelSeq *int64 `json:"keel_seq"`
	}
	if err := c.dc.FromPayload(data[0], &v); err != nil {
		return 0, false, fmt.Errorf("keel: read a commit marker: %w", err)
	}
	if v.KeelSeq == nil {
		// Another side effect.
		return 0, false, nil
	}
	return *v.KeelSeq, true, nil
}
