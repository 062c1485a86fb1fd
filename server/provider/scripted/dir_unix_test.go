//go:build unix

package scripted

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A FIFO in the scripts directory is refused at once: the old loader's
// read would have blocked until a writer came, and every other model turn
// of the worker behind it.
func TestDirRefusesFIFOWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.json"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	writeFile(t, filepath.Join(dir, "ok.json"), okScript)
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	within(t, 10*time.Second, func() {
		if d.Has("pipe") {
			t.Error("Has(pipe) = true")
		}
		if _, err := d.Script("pipe"); !errors.Is(err, ErrNotRegular) {
			t.Errorf("Script(pipe) = %v, want ErrNotRegular", err)
		}
		if _, err := d.Script("ok"); err != nil {
			t.Error(err)
		}
	})
	// Load, which opens without the stat first, refuses it as well.
	within(t, 10*time.Second, func() {
		if _, err := Load(filepath.Join(dir, "pipe.json")); !errors.Is(err, ErrNotRegular) {
			t.Errorf("Load(FIFO) = %v, want ErrNotRegular", err)
		}
	})
}

// A device is refused without a byte read: /dev/zero would have been read
// until the worker ran out of memory.
func TestRefusesDevices(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	within(t, 10*time.Second, func() {
		if _, err := Load("/dev/zero"); !errors.Is(err, ErrNotRegular) {
			t.Errorf("Load(/dev/zero) = %v, want ErrNotRegular", err)
		}
	})
	dir := t.TempDir()
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.json")); err != nil {
		t.Fatal(err)
	}
	// A device node inside the directory (only root can make one).
	devErr := syscall.Mknod(filepath.Join(dir, "dev.json"), syscall.S_IFCHR|0o644, 1<<8|5)
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	within(t, 10*time.Second, func() {
		if _, err := d.Script("zero"); !errors.Is(err, ErrNoScript) {
			t.Errorf("a symlink out of the directory: %v, want ErrNoScript", err)
		}
		if devErr == nil {
			if _, err := d.Script("dev"); !errors.Is(err, ErrNotRegular) {
				t.Errorf("a device in the directory: %v, want ErrNotRegular", err)
			}
		}
	})
}
