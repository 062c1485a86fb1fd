package workflows

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// Pages are bounded by bytes as well as by count: a log of 600 events of
// 64 KiB each (39 MB) was one 500-event page of 32 MB before, which
// Temporal refuses to return (TMPRL1103, over its 2 MB payload limit).
// Every page now stays under the limit, and paging with the pinned
// snapshot still reads every event once.
func TestEventPagesAreBoundedByBytes(t *testing.T) {
	big := strings.Repeat("x", 64<<10)
	data, err := json.Marshal(keel.ToolFinished{ToolCallID: "c", Name: "read_file", Status: keel.ToolOK, Output: big})
	require.NoError(t, err)
	var log []keel.Envelope
	for i := range 600 {
		log = append(log, keel.Envelope{Seq: int64(i + 1), Type: keel.TypeToolFinished, SessionID: "s", RunID: "s/run-1", Data: data})
	}
	const payloadLimit = 2 << 20
	q := api.EventsQuery{}
	var read []int64
	for pages := 0; ; pages++ {
		require.Less(t, pages, 600, "paging ends")
		page, err := pageEvents(log, 0, 600, q)
		require.NoError(t, err)
		b, err := json.Marshal(page)
		require.NoError(t, err)
		require.Less(t, len(b), payloadLimit, "page after %d is %d bytes", q.After, len(b))
		require.NotEmpty(t, page.Events)
		for _, ev := range page.Events {
			read = append(read, ev.Seq)
		}
		if !page.More {
			break
		}
		q = api.EventsQuery{After: page.Events[len(page.Events)-1].Seq, Snapshot: page.Snapshot}
	}
	require.Len(t, read, 600)
	for i, seq := range read {
		require.Equal(t, int64(i+1), seq)
	}
}

// The history query pages by bytes too; a message larger than the bound
// still comes back, alone.
func TestHistoryPagesAreBoundedByBytes(t *testing.T) {
	var msgs []keel.Message
	for range 100 {
		msgs = append(msgs, keel.Message{Role: keel.RoleTool, Content: strings.Repeat("y", 64<<10)})
	}
	msgs = append(msgs, keel.Message{Role: keel.RoleTool, Content: strings.Repeat("z", 3<<20)})
	off := 0
	for off < len(msgs) {
		page := pageHistory(msgs, 1, api.HistoryQuery{Offset: off})
		require.NotEmpty(t, page.Messages)
		b, err := json.Marshal(page)
		require.NoError(t, err)
		if len(page.Messages) > 1 {
			require.LessOrEqual(t, len(b), api.MaxPageBytes+(64<<10)+1024)
		}
		off += len(page.Messages)
	}
	require.Equal(t, len(msgs), off)
}
