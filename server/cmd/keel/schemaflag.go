package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/keelrun/keel/api"
)

// schemaFlag is --output-schema FILE: a JSON Schema the run's final answer
// must match (docs/contract.md §21.1). The file is read here, on the
// client's side, and sent as a value: the worker never opens a file a
// client names.
type schemaFlag struct {
	path   string
	schema json.RawMessage
}

func (f *schemaFlag) String() string { return f.path }

func (f *schemaFlag) Set(path string) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	// One byte past the limit is enough to know the file is over it.
	data, err := io.ReadAll(io.LimitReader(file, api.MaxOutputSchemaBytes+1))
	if err != nil {
		return err
	}
	if err := api.CheckOutputSchema(data); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	if len(data) == 0 {
		return fmt.Errorf("%s is empty; want a JSON Schema object", path)
	}
	f.path, f.schema = path, data
	return nil
}
