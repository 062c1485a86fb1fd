package delegation_test

import (
	"strings"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/delegation"
)

// A child's ID is its parent's, its path and the drawn part, within the
// session-ID rules for the longest parent and path; every such ID has the
// child form, and IDs a client may choose need not (docs/contract.md
// §21.3).
func TestChildSessionID(t *testing.T) {
	const nonce = "0123456789abcdef"
	if got := delegation.ChildSessionID("p", "researcher-3", nonce); got != "p--researcher-3-"+nonce {
		t.Fatalf("ChildSessionID = %q", got)
	}
	longParent := strings.Repeat("x", keel.MaxIDLength)
	longPath := delegation.ChildPath(strings.Repeat("a", api.MaxAgentNameBytes), 1<<62)
	for _, c := range []struct{ parent, path string }{{"p", "r-1"}, {longParent, "r-1"}, {longParent, longPath}, {"-", longPath}} {
		id := delegation.ChildSessionID(c.parent, c.path, nonce)
		if err := keel.ValidateSessionID(id); err != nil {
			t.Errorf("child of %.10s… at %s: %v", c.parent, c.path, err)
		}
		if !api.IsChildSessionID(id) {
			t.Errorf("%s does not have the child form", id)
		}
	}
	if delegation.ChildSessionID(longParent, "r-1", nonce) == delegation.ChildSessionID(longParent+"y", "r-1", nonce) {
		t.Error("two long parents share a child ID")
	}
	for _, id := range []string{
		"p", "p--researcher-1", // an ID of before the drawn part
		"p--researcher-1-0123456789abcde",   // 15 hex
		"p--researcher-1-0123456789ABCDEF",  // upper case
		"p--researcher-x-0123456789abcdef",  // no number
		"p--researcher--0123456789abcdef",   // an empty number
		"p-researcher-1-0123456789abcdef",   // no "--"
		"--researcher-1-0123456789abcdef",   // no parent
		"p---1-0123456789abcdef",            // no agent
		"team-b-1-0123456789abcdef",         // a client's ID with a number and hex
		"p--researcher-1-0123456789abcdef0", // 17 hex
	} {
		if api.IsChildSessionID(id) {
			t.Errorf("%s has the child form", id)
		}
	}
}
