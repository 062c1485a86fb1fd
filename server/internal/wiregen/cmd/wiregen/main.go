// Command wiregen writes the files package wiregen generates: go run
// ./internal/wiregen/cmd/wiregen from the server module (or go generate
// ./gateway).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/keelrun/keel/server/internal/wiregen"
)

func main() {
	root := flag.String("root", "", "the repository's root (default: found from the working directory)")
	raw := flag.Bool("raw", false, "print the schemas the types alone make, unannotated, and stop")
	flag.Parse()
	if *raw {
		s, err := wiregen.RawSchemas()
		if err == nil {
			var b []byte
			if b, err = s.MarshalJSON(); err == nil {
				_, err = os.Stdout.Write(b)
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "wiregen:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "wiregen:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	if root == "" {
		var err error
		if root, err = wiregen.FindRoot(); err != nil {
			return err
		}
	}
	files, err := wiregen.Generate(root)
	if err != nil {
		return err
	}
	for _, f := range files {
		path := filepath.Join(root, f.Path)
		old, _ := os.ReadFile(path)
		if string(old) == string(f.Data) {
			continue
		}
		if err := os.WriteFile(path, f.Data, 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", f.Path)
	}
	return nil
}
