package scripted

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// MaxScriptBytes bounds a script file: a larger one is refused with
// ErrTooLarge after reading at most one byte more than this.
const MaxScriptBytes = 1 << 20

// Ext is the extension of a script file: scripted:NAME is DIR/NAME.json.
const Ext = ".json"

// Dir is a Source of the script files in a directory: scripted:NAME plays
// DIR/NAME.json. Files are opened through an os.Root on the directory, so
// no name (nor a symlink in it) reaches outside; a file must be a regular
// file (a FIFO or a device is refused without blocking) of at most
// MaxScriptBytes. A script is read on its first use and again once its
// file changes (size or modification time); uses of a name that is being
// read wait for that one read, and uses of other names never wait for it.
type Dir struct {
	root *os.Root

	mu      sync.Mutex
	scripts map[string]*dirEntry
}

var _ Source = (*Dir)(nil)

// dirEntry is one name's script, or the read in flight that produces it.
type dirEntry struct {
	done    chan struct{} // closed once the read ended
	script  *Script
	err     error
	size    int64
	modTime time.Time
}

// OpenDir opens the scripts directory at path, which must exist.
func OpenDir(path string) (*Dir, error) {
	root, err := os.OpenRoot(path)
	if err != nil {
		return nil, fmt.Errorf("scripted: scripts directory: %w", err)
	}
	return &Dir{root: root, scripts: map[string]*dirEntry{}}, nil
}

// Path is the directory's path as OpenDir was given it.
func (d *Dir) Path() string { return d.root.Name() }

// Close releases the directory.
func (d *Dir) Close() error { return d.root.Close() }

// stat returns the file of a valid name, following symlinks inside the
// directory only; it opens nothing.
func (d *Dir) stat(name string) (fs.FileInfo, error) {
	if !ValidName(name) {
		return nil, ErrBadName
	}
	fi, err := d.root.Stat(name + Ext)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrNoScript, name)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s%s", ErrNotRegular, name, Ext)
	}
	return fi, nil
}

// Has implements Source: name is valid and NAME.json a regular file.
func (d *Dir) Has(name string) bool {
	_, err := d.stat(name)
	return err == nil
}

// Script implements Source.
func (d *Dir) Script(name string) (*Script, error) {
	fi, err := d.stat(name)
	if err != nil {
		d.forget(name)
		return nil, err
	}
	d.mu.Lock()
	e, ok := d.scripts[name]
	if ok {
		select {
		case <-e.done:
			// A finished entry is a script that read well (a failed read
			// removes its entry); it is kept while the file is unchanged.
			ok = e.size == fi.Size() && e.modTime.Equal(fi.ModTime())
		default: // a read in flight: share it
		}
	}
	if !ok {
		e = &dirEntry{done: make(chan struct{})}
		d.scripts[name] = e
		d.mu.Unlock()
		d.read(name, e)
		return e.script, e.err
	}
	d.mu.Unlock()
	<-e.done
	return e.script, e.err
}

// read fills e from the file of name, without holding d.mu, and closes
// e.done. A failed read leaves no entry behind.
func (d *Dir) read(name string, e *dirEntry) {
	defer close(e.done)
	f, err := d.root.OpenFile(name+Ext, os.O_RDONLY|openNonBlock, 0)
	if err != nil {
		e.err = fmt.Errorf("%w: %s", ErrNoScript, name)
	} else {
		var fi fs.FileInfo
		fi, e.script, e.err = readScript(f, name+Ext)
		if fi != nil {
			e.size, e.modTime = fi.Size(), fi.ModTime()
		}
		_ = f.Close()
	}
	if e.err != nil {
		d.mu.Lock()
		if d.scripts[name] == e {
			delete(d.scripts, name)
		}
		d.mu.Unlock()
	}
}

func (d *Dir) forget(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.scripts[name]; ok {
		select {
		case <-e.done:
			delete(d.scripts, name)
		default: // a read in flight removes itself if it fails
		}
	}
}

// Names implements Source: the NAME of each NAME.json with a valid name,
// reading at most a bounded number of directory entries.
func (d *Dir) Names(limit int) ([]string, bool) {
	f, err := d.root.Open(".")
	if err != nil {
		return nil, false
	}
	defer f.Close()
	entries, _ := f.ReadDir(maxListed)
	var names []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), Ext)
		// A symlink counts when it leads to a regular file inside.
		if ok && ValidName(name) && (e.Type().IsRegular() || e.Type()&fs.ModeSymlink != 0 && d.Has(name)) {
			names = append(names, name)
		}
	}
	more := len(entries) == maxListed
	names, over := firstSorted(names, limit)
	return names, more || over
}

// maxListed bounds the directory entries Names reads.
const maxListed = 1000

// readScript reads and checks the script in f (named file in errors): f
// must be a regular file of at most MaxScriptBytes.
func readScript(f *os.File, file string) (fs.FileInfo, *Script, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("scripted: %s: %w", file, err)
	}
	if !fi.Mode().IsRegular() {
		return fi, nil, fmt.Errorf("%w: %s", ErrNotRegular, file)
	}
	if fi.Size() > MaxScriptBytes {
		return fi, nil, fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrTooLarge, file, fi.Size(), MaxScriptBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxScriptBytes+1))
	if err != nil {
		return fi, nil, fmt.Errorf("scripted: %s: %w", file, err)
	}
	if len(data) > MaxScriptBytes {
		// It grew while being read.
		return fi, nil, fmt.Errorf("%w: %s is over the limit of %d bytes", ErrTooLarge, file, MaxScriptBytes)
	}
	s, err := Parse(data)
	if err != nil {
		return fi, nil, fmt.Errorf("%s: %w", file, err)
	}
	return fi, s, nil
}

// firstSorted returns the first limit of names, sorted, and whether
// there were more.
func firstSorted(names []string, limit int) ([]string, bool) {
	slices.Sort(names)
	if limit >= 0 && len(names) > limit {
		return names[:limit], true
	}
	return names, false
}
