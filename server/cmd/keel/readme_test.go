package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/natsserver"
)

// TestReadmeGoSDKExample starts keel dev as `make run` does (its default
// ports, data directory .keel) and runs Example_goSDK against it; README's
// Go SDK section must show readme_example_test.go's text from its imports
// on.
func TestReadmeGoSDKExample(t *testing.T) {
	source, err := os.ReadFile("readme_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	example := string(source[strings.Index(string(source), "import ("):])
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+example+"```\n") {
		t.Error("README's Go SDK example is not readme_example_test.go from `import (` on")
	}

	t.Chdir(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stack, err := startDevStack(ctx, devConfig{dataDir: ".keel", workspace: filepath.Join(".keel", "workspace"),
		port: devserver.DefaultPort, natsPort: natsserver.DefaultPort, noUI: true, logger: quietLogger()})
	if err != nil {
		t.Fatalf("keel dev on its default ports (stop any keel dev running here): %v", err)
	}
	defer func() { _ = stack.stop() }()

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	printed := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		printed <- string(b)
	}()
	stdout := os.Stdout
	os.Stdout = w
	Example_goSDK()
	os.Stdout = stdout
	_ = w.Close()
	out := <-printed
	for _, want := range []string{"Hello! I'm keel's built-in demo agent.", "\n[list_files]\n", "\n[read_file]\n", "\n[sleep]\n",
		"\n[write_file]\n", "and wrote notes/demo-run.md.", "\n completed 210 output tokens\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the example printed no %q:\n%s", want, out)
		}
	}
}
