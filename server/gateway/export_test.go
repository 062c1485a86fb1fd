package gateway

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/keelrun/keel"
)

// SetRingEvents shrinks the durable events a session's hub keeps, so a
// test can make a stream catch up from pages. Call it before any stream.
func SetRingEvents(g *Gateway, n int) { g.ringEvents = n }

// Hubs reports how many sessions the gateway follows.
func Hubs(g *Gateway) int {
	g.hubsMu.Lock()
	defer g.hubsMu.Unlock()
	return len(g.hubs)
}

// Attach joins a session's hub as a stream with that cursor would, past
// the checks the stream's request goes through first (so a test can give
// the hub a cursor no request could); leave detaches it.
func Attach(g *Gateway, session string, cursor int64) (leave func(), err error) {
	s, err := g.join(session, cursor)
	if err != nil {
		return nil, err
	}
	return s.leave, nil
}

// Followers reports the Temporal history long polls the gateway holds:
// its hubs and its AG-UI streams' followers.
func Followers(g *Gateway) int { return g.followers.count() }

// ParseCursor and CursorOf read stream cursors, for the fuzz targets.
var (
	ParseCursor = parseCursor
	CursorOf    = cursor
)

// AGUIPrompt decodes a POST /v1/ag-ui body as the route does, up to the
// run it would send: its prompt ("" for resume entries, which the run's
// log checks).
func AGUIPrompt(r *http.Request) (string, error) {
	in, err := readAGUIInput(r)
	if err != nil || len(in.Resume) > 0 {
		return "", err
	}
	prompt, _, err := in.runRequest()
	return prompt, err
}

// StatusOf is the HTTP status err answers with.
func StatusOf(err error) int { return fromError(err).status }

// WriteEnvelope writes one element of an event stream as the stream of
// GET /events does.
func WriteEnvelope(sw *SSEWriter, env keel.Envelope) error {
	g := &Gateway{log: zap.NewNop()}
	var last int64
	return g.writeItem(sw, streamItem{env: env}, &last)
}

// ClientAddr is the address a request's streams are counted under,
// behind the trusted proxies given.
func ClientAddr(trusted []string, r *http.Request) (string, error) {
	p, err := parseProxies(trusted)
	if err != nil {
		return "", err
	}
	return p.clientAddr(r), nil
}

// ScheduleConfigRoundTrip is c through api.RunConfig and back, as a
// schedule's config goes to the client and comes back in its description.
func ScheduleConfigRoundTrip(c *ScheduleConfig) *ScheduleConfig {
	return scheduleConfigOf(c.runConfig())
}
