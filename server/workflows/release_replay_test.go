package workflows_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// The release gate: the histories in testdata as they were committed at
// keel's previous release, replayed with today's code. Those are the
// workflows a deploy meets in flight, whatever testdata holds today: a
// change that re-records a history without guarding the old path with
// workflow.GetVersion passes TestReplayRecordedHistories and fails here.
// The release is named by the RELEASE file at the repository root
// (docs/operations.md, "Rolling out a new version"); KEEL_PREVIOUS_RELEASE
// overrides it with any git revision.

// releaseEnv overrides the RELEASE file.
const releaseEnv = "KEEL_PREVIOUS_RELEASE"

func TestReplayPreviousRelease(t *testing.T) {
	root, err := gitOutput(".", "rev-parse", "--show-toplevel")
	if err != nil {
		// A copy of the module outside a git checkout has no history to
		// read. CI runs from a full clone; a copy without one cannot hold
		// the gate, and says so rather than fail for want of git.
		t.Skipf("not in a git checkout (%v): the release gate needs one", err)
	}
	root = strings.TrimSpace(root)
	ref, err := previousRelease(root)
	if err != nil {
		t.Fatal(err)
	}
	commit, err := gitOutput(root, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if err != nil {
		if shallow, _ := gitOutput(root, "rev-parse", "--is-shallow-repository"); strings.TrimSpace(shallow) == "true" {
			t.Skipf("the previous release %q is not in this shallow clone: the release gate needs the full history (git fetch --unshallow)", ref)
		}
		t.Fatalf("the previous release %q (RELEASE or $%s) is not a commit of this clone: "+
			"a shallow clone lacks it (git fetch --unshallow), or the name is wrong", ref, releaseEnv)
	}
	commit = strings.TrimSpace(commit)
	dir := t.TempDir()
	files, err := extractTestdata(root, commit, dir)
	if err != nil {
		t.Fatalf("reading the recorded histories at %s: %v", commit, err)
	}
	if len(files) == 0 {
		t.Fatalf("%s (%s) holds no recorded history", ref, commit)
	}
	t.Logf("replaying %d histories of %s (%s)", len(files), ref, commit[:12])
	for _, name := range files {
		t.Run(name, func(t *testing.T) {
			if err := replayHistory(filepath.Join(dir, name), filepath.Join(dir, "store")); err != nil {
				t.Fatalf("%s as recorded at the previous release %s does not replay with today's workflows: %v\n"+
					"Workflows of that release in flight at the deploy would fail. Guard the change with "+
					"workflow.GetVersion (docs/testing.md); never move RELEASE forward to make this pass.",
					name, ref, err)
			}
		})
	}
}

// previousRelease reads the revision the RELEASE file names: its first
// line that is neither empty nor a comment.
func previousRelease(root string) (string, error) {
	if ref := os.Getenv(releaseEnv); ref != "" {
		return ref, nil
	}
	f, err := os.Open(filepath.Join(root, "RELEASE"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			return line, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("RELEASE names no revision")
}

// testdataDirs are where a commit holds the recorded histories, newest
// layout first: server/workflows/testdata since the server module (issue
// 36), workflows/testdata before it, as at v0.1.0. The gate reads the
// first one the release's commit has, so a release on either side of the
// move is replayed.
var testdataDirs = []string{"server/workflows/testdata/", "workflows/testdata/"}

// extractTestdata writes the recorded histories as committed at commit
// (the first of testdataDirs it holds) into dir and returns the names of
// its recorded histories (its top-level JSON files).
func extractTestdata(root, commit, dir string) ([]string, error) {
	prefix := ""
	for _, d := range testdataDirs {
		if _, err := gitOutput(root, "rev-parse", "--verify", "--quiet", commit+":"+d); err == nil {
			prefix = d
			break
		}
	}
	if prefix == "" {
		return nil, fmt.Errorf("none of %v at %s", testdataDirs, commit)
	}
	cmd := exec.Command("git", "archive", "--format=tar", commit, prefix)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.New(strings.TrimSpace(stderr.String()) + ": " + err.Error())
	}
	var histories []string
	tr := tar.NewReader(bytes.NewReader(out))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return histories, nil
		}
		if err != nil {
			return nil, err
		}
		rel, ok := strings.CutPrefix(h.Name, prefix)
		if !ok || h.Typeflag != tar.TypeReg || !filepath.IsLocal(rel) {
			continue
		}
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return nil, err
		}
		if path.Dir(rel) == "." && path.Ext(rel) == ".json" {
			histories = append(histories, rel)
		}
	}
}

func gitOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	return string(out), err
}
