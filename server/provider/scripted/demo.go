package scripted

import (
	_ "embed"
)

//go:embed demo.json
var demoJSON []byte

// DemoTools are the tools the demo script calls.
var DemoTools = []string{"list_files", "read_file", "sleep", "write_file"}

// Demo returns the built-in demo script ("scripted:demo"): a short agent
// run that lists and reads the workspace, sleeps on a durable timer and
// writes a note.
func Demo() *Script {
	s, err := Parse(demoJSON)
	if err != nil {
		panic("scripted: built-in demo script is broken: " + err.Error())
	}
	return s
}

// DemoWelcome is the file the demo reads; `keel dev` seeds a new workspace
// with it.
const DemoWelcome = `Welcome to keel.

This file lives in the demo workspace. The demo agent reads it with the
read_file tool, which is confined to this directory: paths that escape it
(.., absolute paths, symlinks pointing outside) are refused.
`
