package keeltest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// EnvKeelBin names a keel binary the tests run instead of building one
// (make test-postgres sets it to the binary it built).
const EnvKeelBin = "KEEL_BIN"

// KeelBinary returns $KEEL_BIN, or builds keel (the full build, with
// `keel dev`) into the test's temporary directory.
func KeelBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv(EnvKeelBin); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	bin := filepath.Join(t.TempDir(), "keel")
	build := exec.Command("go", "build", "-o", bin, "github.com/keelrun/keel/server/cmd/keel")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build keel: %v\n%s", err, out)
	}
	return bin
}
