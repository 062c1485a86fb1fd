package gateway

import (
	"context"
	"fmt"
	"net/http"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

// maxCursorDigits bounds a cursor's text: the digits of math.MaxInt64.
const maxCursorDigits = 19

// parseCursor reads a durable sequence as the gateway writes it in an SSE
// id: ASCII digits only (no sign, space or prefix), at most
// math.MaxInt64. Anything else is a typed invalid_input error that does
// not quote more than a few bytes of what was sent.
func parseCursor(name, v string) (int64, error) {
	bad := func() error {
		return keel.Errorf(keel.CodeInvalidInput, "%s %s: want the seq of a durable event, an integer from 0", name, quoteShort(v))
	}
	if v == "" || len(v) > maxCursorDigits {
		return 0, bad()
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, bad()
		}
		d := int64(c - '0')
		if n > (1<<63-1-d)/10 {
			return 0, bad() // past math.MaxInt64
		}
		n = n*10 + d
	}
	return n, nil
}

// quoteShort quotes at most the first 24 bytes of v, for error messages
// about what a caller sent.
func quoteShort(v string) string {
	const most = 24
	if len(v) > most {
		return fmt.Sprintf("%q… (%d bytes)", v[:most], len(v))
	}
	return fmt.Sprintf("%q", v)
}

// cursor reads where a stream starts: Last-Event-ID (a browser
// reconnecting, with its original URL) wins over ?after=N, else 0. Both
// are checked when both are there.
//
// An empty value counts as none; a repeated one is refused, since the
// two copies could disagree.
func cursor(r *http.Request) (int64, error) {
	after, err := oneCursor("after", r.URL.Query()["after"])
	if err != nil {
		return 0, err
	}
	id, err := oneCursor("Last-Event-ID", r.Header.Values("Last-Event-ID"))
	if err != nil {
		return 0, err
	}
	if id >= 0 {
		return id, nil
	}
	return max(after, 0), nil
}

// oneCursor parses the values of one cursor parameter; -1 when there is
// none.
func oneCursor(name string, vs []string) (int64, error) {
	switch {
	case len(vs) == 0 || len(vs) == 1 && vs[0] == "":
		return -1, nil
	case len(vs) > 1:
		return 0, keel.Errorf(keel.CodeInvalidInput, "%s is given %d times; give it once", name, len(vs))
	}
	return parseCursor(name, vs[0])
}

// checkCursor refuses a cursor past the end of the session's log with a
// typed 409 cursor_ahead: no honest client has one (every SSE id the
// gateway writes is a committed event, and the query runs after the
// request that carries it), so it names another incarnation of the
// session or another session. st is the session's state, read after the
// request arrived; the active run's events follow st.LastSeq and are
// counted through the run's own state only when the cursor needs them.
func checkCursor(ctx context.Context, s *client.Session, st api.SessionStatus, after int64) error {
	if after <= st.LastSeq {
		return nil
	}
	end := st.LastSeq
	if st.ActiveRun != nil {
		rs, err := s.Run(st.ActiveRun.Number).State(ctx)
		if err != nil {
			return err
		}
		end = max(end, rs.LastSeq)
	}
	if after <= end {
		return nil
	}
	return &Error{Code: CodeCursorAhead, status: http.StatusConflict,
		Message: fmt.Sprintf("cursor %d is past the end of session %s's log (its last event is %d): the session was recreated "+
			"or the id is another session's; read it again from after=0", after, s.ID(), end)}
}
