package workflows

import (
	"fmt"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// steering holds input the host sends while a run runs. It is staged when
// accepted and enters the transcript at the next model-step boundary, in
// acceptance order, unless retracted first (docs/contract.md §5). It does
// no I/O and never blocks: every race with the boundary is decided by the
// order in which the workflow calls it.
type steering struct {
	emit   emitFunc
	byID   map[string]*steer
	staged []*steer
	count  int
}

type steer struct {
	id, text string
	atts     []keel.Attachment
	applied  bool
}

func newSteering(emit emitFunc) *steering {
	return &steering{emit: emit, byID: map[string]*steer{}}
}

// stage accepts text and its attachments for the next boundary and
// returns its steering ID.
func (s *steering) stage(text string, atts []keel.Attachment) string {
	s.count++
	st := &steer{id: fmt.Sprintf("steer-%d", s.count), text: text, atts: atts}
	s.byID[st.id] = st
	s.staged = append(s.staged, st)
	s.emit(keel.SteeringAccepted{SteeringID: st.id, Text: st.text})
	return st.id
}

// retract withdraws staged steering that has not been applied yet.
func (s *steering) retract(id string) api.Retraction {
	st, ok := s.byID[id]
	switch {
	case !ok:
		return api.NotFound
	case st.applied:
		return api.AlreadyApplied
	}
	for i, x := range s.staged {
		if x == st {
			s.staged = append(s.staged[:i:i], s.staged[i+1:]...)
			break
		}
	}
	delete(s.byID, id)
	s.emit(keel.SteeringRetracted{SteeringID: id})
	return api.Retracted
}

// apply takes every staged steer, in acceptance order, and returns the
// user messages it becomes.
func (s *steering) apply() []keel.Message {
	var msgs []keel.Message
	for _, st := range s.staged {
		st.applied = true
		s.emit(keel.SteeringApplied{SteeringID: st.id})
		msgs = append(msgs, keel.Message{Role: keel.RoleUser, Content: st.text, SteeringID: st.id, Attachments: st.atts})
	}
	s.staged = nil
	return msgs
}

// pending reports whether steering waits for a boundary.
func (s *steering) pending() bool { return len(s.staged) > 0 }

// stagedCount is the number of steering inputs waiting for a boundary.
func (s *steering) stagedCount() int { return len(s.staged) }

// stagedIDs lists the staged steering, oldest first.
func (s *steering) stagedIDs() []string {
	var ids []string
	for _, st := range s.staged {
		ids = append(ids, st.id)
	}
	return ids
}
