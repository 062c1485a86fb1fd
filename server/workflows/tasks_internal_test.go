package workflows

import "testing"

// docs/contract.md §14.2: the state is ahead of its last task only when the
// log moved in a run of the workflow that is not replaying, at the
// history length of a task that was replayed: a query replay applying
// events no task has processed.
func TestTaskWatchMarksStateAheadOfItsTask(t *testing.T) {
	type look struct {
		at        int
		replaying bool
		seq       int64
	}
	for _, c := range []struct {
		name  string
		looks []look
		ahead bool
	}{
		{"live tasks", []look{{3, false, 0}, {3, false, 2}, {9, false, 2}, {9, false, 5}}, false},
		{"replay, then a live task", []look{{3, true, 2}, {9, true, 4}, {15, false, 4}, {15, false, 7}}, false},
		{"replay, then events no task processed", []look{{3, true, 2}, {9, true, 4}, {9, false, 4}, {9, false, 6}}, true},
		{"replay, then a run that changed nothing", []look{{3, true, 2}, {9, true, 4}, {9, false, 4}}, false},
		{"ahead, then a new task", []look{{9, true, 4}, {9, false, 6}, {15, false, 6}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var w taskWatch
			for _, l := range c.looks {
				w.observe(l.at, l.replaying, l.seq)
			}
			if w.ahead != c.ahead {
				t.Errorf("ahead = %v, want %v", w.ahead, c.ahead)
			}
		})
	}
}
