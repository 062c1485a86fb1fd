package scripted

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// A client names a script (model spec "scripted:NAME"); it never locates
// one. The worker's operator provides the scripts: in a directory (Dir,
// `keel worker --scripts DIR`), or from Go in memory (Library).

// MaxNameBytes bounds a script's name.
const MaxNameBytes = 128

// DemoName is the name of the built-in demo script ("scripted:demo"): no
// Source is asked for it.
const DemoName = "demo"

// scriptName is a conservative name: letters, digits, '_', '-' and '.',
// starting with a letter or digit. It never holds '/', '\' or ':'.
var scriptName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// ValidName reports whether name can name a script: 1 to MaxNameBytes
// letters, digits, '_', '-' and '.', starting with a letter or digit and
// without "..". A name is never a path: a valid name is a plain file name
// in the scripts directory (NAME.json).
func ValidName(name string) bool {
	return len(name) <= MaxNameBytes && scriptName.MatchString(name) && !strings.Contains(name, "..")
}

// Errors of a Source. Each is wrapped with the script's name; test with
// errors.Is.
var (
	// ErrBadName: the name is not ValidName.
	ErrBadName = errors.New("scripted: not a script name")
	// ErrNoScript: the source holds no script of that name.
	ErrNoScript = errors.New("scripted: no such script")
	// ErrNotRegular: the script's file is not a regular file (a FIFO, a
	// device, a directory); it is refused without being read.
	ErrNotRegular = errors.New("scripted: not a regular file")
	// ErrTooLarge: the script's file is over MaxScriptBytes.
	ErrTooLarge = errors.New("scripted: script too large")
)

// Source is where a worker finds the scripts its clients name.
// Implementations are safe for concurrent use.
type Source interface {
	// Has reports whether the source offers a script of this name, without
	// reading it. It is cheap (at most a stat) and never blocks on a
	// script's content.
	Has(name string) bool
	// Script returns the checked script of this name: an error wrapping
	// ErrBadName, ErrNoScript, ErrNotRegular or ErrTooLarge, or a parse
	// error of the script.
	Script(name string) (*Script, error)
	// Names lists up to limit of the source's scripts, sorted, and whether
	// it holds more.
	Names(limit int) (names []string, more bool)
}

// Library is a Source of scripts held in memory, added from Go (tests,
// programs that embed a worker). The zero value is empty and ready.
type Library struct {
	mu      sync.RWMutex
	scripts map[string]*Script
}

var _ Source = (*Library)(nil)

// Add adds (or replaces) the script of name.
func (l *Library) Add(name string, s *Script) error {
	if !ValidName(name) {
		return fmt.Errorf("%w: %q", ErrBadName, name)
	}
	if s == nil {
		return fmt.Errorf("scripted: script %s is nil", name)
	}
	if err := s.check(); err != nil {
		return fmt.Errorf("script %s: %w", name, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.scripts == nil {
		l.scripts = map[string]*Script{}
	}
	l.scripts[name] = s
	return nil
}

// Has implements Source.
func (l *Library) Has(name string) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	_, ok := l.scripts[name]
	return ok
}

// Script implements Source.
func (l *Library) Script(name string) (*Script, error) {
	if !ValidName(name) {
		return nil, ErrBadName
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	s, ok := l.scripts[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoScript, name)
	}
	return s, nil
}

// Names implements Source.
func (l *Library) Names(limit int) ([]string, bool) {
	l.mu.RLock()
	names := make([]string, 0, len(l.scripts))
	for name := range l.scripts {
		names = append(names, name)
	}
	l.mu.RUnlock()
	return firstSorted(names, limit)
}
