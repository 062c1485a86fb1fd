package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// keel dev's NATS server requires an NKey: a user key pair whose seed
// keel dev keeps in DATA_DIR/nats.nk (random, 0600, reused while the data
// directory lives) and whose public key the server accepts. Its worker,
// HTTP API and demo sign with it in memory. So that `keel run`, `keel
// events --follow` and `keel worker` on the same machine need no flag,
// keel dev also copies the seed to a file of the user's, keyed by the
// server's URL (KEEL_CONFIG_DIR/nats/<host>-<port>.nk, the configuration
// directory keel/ by default), and a command that dials a loopback NATS
// URL without credentials of its own signs with that file's seed. With an
// NKey the client signs the server's nonce: no secret crosses the
// connection, so a command that reaches another program on that port
// gives nothing away. Two keel dev stacks on different ports have
// different entries; one that takes over a port rewrites its entry, and
// keel dev removes its entry when it stops.
const (
	// devNATSSeedFile is the seed's file under --data-dir.
	devNATSSeedFile = "nats.nk"
	// envConfigDir overrides the directory of keel's per-user files.
	envConfigDir = "KEEL_CONFIG_DIR"
	// maxSeedFile bounds a seed file keel reads: a seed and a comment.
	maxSeedFile = 4 << 10
)

// devNATSUser returns keel dev's NATS user key pair and its seed: the one
// in dataDir/nats.nk, created if missing; without a data directory (tests)
// a fresh one. A file there that holds no user seed is an error that names
// it: keel does not overwrite what it did not write.
func devNATSUser(dataDir string) (nkeys.KeyPair, []byte, error) {
	if dataDir == "" {
		return newNATSUser()
	}
	path := filepath.Join(dataDir, devNATSSeedFile)
	data, err := readSeedFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		kp, seed, err := newNATSUser()
		if err != nil {
			return nil, nil, err
		}
		if err := writePrivate(path, seedFileContents(seed, "keel dev's NATS user, for the data directory "+absPath(dataDir))); err != nil {
			return nil, nil, fmt.Errorf("keel dev: NATS credentials: %w", err)
		}
		return kp, seed, nil
	case err != nil:
		return nil, nil, fmt.Errorf("keel dev: NATS credentials: %w", err)
	}
	kp, err := nkeys.ParseDecoratedUserNKey(data)
	if err != nil {
		return nil, nil, fmt.Errorf("keel dev: NATS credentials: %s holds no NATS user seed (%v); remove it to make a new one", path, err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, nil, fmt.Errorf("keel dev: NATS credentials %s: %w", path, err)
	}
	return kp, seed, nil
}

func newNATSUser() (nkeys.KeyPair, []byte, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, nil, fmt.Errorf("keel dev: NATS credentials: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, nil, fmt.Errorf("keel dev: NATS credentials: %w", err)
	}
	return kp, seed, nil
}

func seedFileContents(seed []byte, comment string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s. Keep it private: whoever holds it may read and publish every live delta.\n", comment)
	b.Write(seed)
	b.WriteByte('\n')
	return b.Bytes()
}

// readSeedFile reads a seed file keel wrote: a regular file (not a link
// someone put there) of at most maxSeedFile bytes. A file others may read
// is made private again.
func readSeedFile(path string) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() > maxSeedFile {
		return nil, fmt.Errorf("%s is over %d bytes: not a seed file", path, maxSeedFile)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, err
		}
	}
	return os.ReadFile(path)
}

// writePrivate writes data to path with mode 0600, atomically: a reader
// sees the old contents or the new, never a part.
func writePrivate(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".keel-*.tmp") // 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// devNATSDir is where keel dev records its servers' seeds for local
// commands: $KEEL_CONFIG_DIR/nats, else the user's configuration
// directory's keel/nats.
func devNATSDir() (string, error) {
	if d := os.Getenv(envConfigDir); d != "" {
		return filepath.Join(d, "nats"), nil
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "keel", "nats"), nil
}

// devNATSEntry is the file that records the seed of keel dev's server at
// the NATS URL u, "" unless u is one loopback server (keel dev listens on
// loopback; a command dialling another host never uses these files).
func devNATSEntry(u string) string {
	if strings.Contains(u, ",") {
		return ""
	}
	if !strings.Contains(u, "://") {
		u = "nats://" + u // as nats.go reads it
	}
	parsed, err := url.Parse(u)
	if err != nil || parsed.User != nil || parsed.Scheme != "nats" {
		return ""
	}
	host, port := parsed.Hostname(), parsed.Port()
	if port == "" {
		port = "4222"
	}
	if strings.EqualFold(host, "localhost") {
		host = "127.0.0.1"
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return ""
	}
	dir, err := devNATSDir()
	if err != nil {
		return ""
	}
	name := strings.NewReplacer(":", "_", "%", "_").Replace(ip.String())
	return filepath.Join(dir, name+"-"+port+".nk")
}

// devNATSCredentials returns the seed file keel dev recorded for its
// server at url, "" if there is none.
func devNATSCredentials(url string) string {
	path := devNATSEntry(url)
	if path == "" {
		return ""
	}
	if _, err := readSeedFile(path); err != nil {
		return ""
	}
	return path
}

// registerDevNATS records seed for keel dev's server at clientURL, for
// local commands, and returns the file.
func registerDevNATS(clientURL string, seed []byte, dataDir string) (string, error) {
	path := devNATSEntry(clientURL)
	if path == "" {
		return "", fmt.Errorf("%s is not a loopback NATS URL", clientURL)
	}
	where := "a keel dev without a data directory"
	if dataDir != "" {
		where = "the data directory " + absPath(dataDir)
	}
	if err := writePrivate(path, seedFileContents(seed, fmt.Sprintf("keel dev's NATS user at %s, of %s", clientURL, where))); err != nil {
		return "", err
	}
	return path, nil
}

// unregisterDevNATS removes keel dev's record at path if it still holds
// seed: a later keel dev on the same port keeps its own.
func unregisterDevNATS(path string, seed []byte) {
	if path == "" {
		return
	}
	data, err := readSeedFile(path)
	if err != nil {
		return
	}
	kp, err := nkeys.ParseDecoratedUserNKey(data)
	if err != nil {
		return
	}
	if s, err := kp.Seed(); err == nil && bytes.Equal(s, seed) {
		_ = os.Remove(path)
	}
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// devNATSLogin is keel dev's NATS user: the key pair its own connections
// sign with in memory, and where local commands find its seed.
type devNATSLogin struct {
	kp       nkeys.KeyPair
	seed     []byte
	seedFile string // DATA_DIR/nats.nk; "" without a data directory
	entry    string // the per-user record; "" if it could not be written
	entryErr error
}

// option signs the server's challenge with the key pair.
func (l devNATSLogin) option() nats.Option {
	pub, _ := l.kp.PublicKey()
	return nats.Nkey(pub, l.kp.Sign)
}

// unregister removes the per-user record if it is still this stack's.
func (l *devNATSLogin) unregister() {
	unregisterDevNATS(l.entry, l.seed)
	l.entry = ""
}

// note is what keel dev's banner adds to the NATS address.
func (l devNATSLogin) note(encrypted bool) string {
	where := "in memory"
	if l.seedFile != "" {
		where = "in " + l.seedFile
	}
	n := "  (NKey " + where
	if l.entryErr != nil {
		n += "; other commands need --nats-nkey-file: " + sanitize(l.entryErr.Error())
	}
	if encrypted {
		n += "; deltas encrypted"
	}
	return n + ")"
}
