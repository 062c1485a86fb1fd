package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// keel dev's NKey seed lives in DATA_DIR/nats.nk, private, and the same
// data directory gives the same seed on every start; a file there that is
// no seed is an error, and is left alone.
func TestDevNATSUserIsPrivateAndReused(t *testing.T) {
	dir := t.TempDir()
	_, seed, err := devNATSUser(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, devNATSSeedFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", path, fi.Mode().Perm())
	}
	_, again, err := devNATSUser(dir)
	if err != nil || !bytes.Equal(seed, again) {
		t.Errorf("a restart on the same data directory got another seed (%v)", err)
	}
	if _, other, _ := devNATSUser(t.TempDir()); bytes.Equal(seed, other) {
		t.Error("two data directories got the same seed")
	}
	// The file is usable as --nats-nkey-file.
	if _, err := nats.NkeyOptionFromSeed(path); err != nil {
		t.Errorf("nats.NkeyOptionFromSeed(%s): %v", path, err)
	}
	// Made private again if someone opened it up.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := devNATSUser(dir); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v after a start, want 0600", fi.Mode().Perm())
	}

	bad := t.TempDir()
	junk := []byte("not a seed\n")
	if err := os.WriteFile(filepath.Join(bad, devNATSSeedFile), junk, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := devNATSUser(bad); err == nil || !strings.Contains(err.Error(), filepath.Join(bad, devNATSSeedFile)) {
		t.Errorf("a data directory with junk in nats.nk: %v, want an error naming the file", err)
	}
	if got, _ := os.ReadFile(filepath.Join(bad, devNATSSeedFile)); !bytes.Equal(got, junk) {
		t.Error("keel dev overwrote a nats.nk it had not written")
	}
	// A link planted where the seed goes is not followed.
	linked := t.TempDir()
	if err := os.Symlink(path, filepath.Join(linked, devNATSSeedFile)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := devNATSUser(linked); err == nil {
		t.Error("keel dev used a symbolic link as its seed file")
	}
}

// The per-user records are keyed by the server's loopback URL: two stacks
// on two ports each have theirs, a command finds the one for the URL it
// dials, and nothing is found for another host, a URL with credentials of
// its own or a list of servers.
func TestDevNATSRecords(t *testing.T) {
	t.Setenv(envConfigDir, t.TempDir())
	_, seedA, _ := newNATSUser()
	_, seedB, _ := newNATSUser()
	a, err := registerDevNATS("nats://127.0.0.1:4222", seedA, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := registerDevNATS("nats://127.0.0.1:4333", seedB, "/data/b")
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatalf("two ports share the record %s", a)
	}
	if fi, _ := os.Stat(a); fi.Mode().Perm() != 0o600 {
		t.Errorf("record mode %v, want 0600", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(filepath.Dir(a)); fi.Mode().Perm() != 0o700 {
		t.Errorf("records directory mode %v, want 0700", fi.Mode().Perm())
	}
	for url, want := range map[string]string{
		"nats://127.0.0.1:4222":                  a,
		"nats://localhost:4222":                  a,
		"127.0.0.1:4222":                         a,
		"nats://127.0.0.1":                       a,
		"nats://127.0.0.1:4333":                  b,
		"nats://127.0.0.1:4444":                  "",
		"nats://10.0.0.5:4222":                   "",
		"nats://nats.internal:4222":              "",
		"nats://u:p@127.0.0.1:4222":              "",
		"tls://127.0.0.1:4222":                   "",
		"nats://127.0.0.1:4222,nats://127.0.0.1": "",
	} {
		if got := devNATSCredentials(url); got != want {
			t.Errorf("devNATSCredentials(%q) = %q, want %q", url, got, want)
		}
	}
	// A stack that stops removes its record, unless another stack has
	// taken the port over since.
	_, seedC, _ := newNATSUser()
	if _, err := registerDevNATS("nats://127.0.0.1:4333", seedC, ""); err != nil {
		t.Fatal(err)
	}
	unregisterDevNATS(b, seedB)
	if devNATSCredentials("nats://127.0.0.1:4333") == "" {
		t.Error("a stopping stack removed the record of the stack that took its port over")
	}
	unregisterDevNATS(a, seedA)
	if devNATSCredentials("nats://127.0.0.1:4222") != "" {
		t.Error("a stopped stack's record is still there")
	}
}

// The attack: anyone on the machine connects to keel dev's NATS server to
// read every session's deltas or publish forged ones. Without credentials,
// with another stack's, and with an NKey it cannot sign for, the server
// refuses; a local command that names no credentials finds the right
// stack's on its own; two stacks with different data directories never
// accept each other's.
func TestDevNATSRequiresItsOwnCredentials(t *testing.T) {
	t.Setenv(envConfigDir, t.TempDir())
	stacks := make([]*devStack, 2)
	for i := range stacks {
		s := &devStack{}
		if err := s.startNATS(devConfig{dataDir: t.TempDir()}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			s.nats.Shutdown()
			s.natsLogin.unregister()
		})
		stacks[i] = s
	}
	dial := func(url string, opts ...nats.Option) error {
		nc, err := nats.Connect(url, append([]nats.Option{nats.Timeout(5 * time.Second)}, opts...)...)
		if err == nil {
			nc.Close()
		}
		return err
	}
	impostor, _ := nkeys.CreateUser()
	for i, s := range stacks {
		other := stacks[1-i]
		url := s.nats.ClientURL()
		pub, _ := s.natsLogin.kp.PublicKey()
		for name, opts := range map[string][]nats.Option{
			"no credentials":       nil,
			"the other stack's":    {other.natsLogin.option()},
			"its key, not signing": {nats.Nkey(pub, impostor.Sign)},
			"a token":              {nats.Token(string(s.natsLogin.seed))},
		} {
			if err := dial(url, opts...); !errors.Is(err, nats.ErrAuthorization) {
				t.Errorf("stack %d, %s: %v, want an authorization violation", i, name, err)
			}
		}
		if err := dial(url, s.natsLogin.option()); err != nil {
			t.Errorf("stack %d with its own key: %v", i, err)
		}
		// What `keel run` does with no NATS flags.
		var nf natsFlags
		opts, err := nf.dialOptions(url)
		if err != nil {
			t.Fatal(err)
		}
		if err := dial(url, opts...); err != nil {
			t.Errorf("a local command dialling stack %d without flags: %v", i, err)
		}
		if !strings.Contains(s.natsLogin.note(false), s.natsLogin.seedFile) {
			t.Errorf("the banner's note %q does not say where the seed is", s.natsLogin.note(false))
		}
	}
}
