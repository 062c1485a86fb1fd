package tool

// Builtins returns a registry holding the built-in tools: sleep, ask_user,
// and the file tools (read_file, write_file, list_files) confined to the
// workspace directory workspaceRoot. The shell tool is opt-in and never
// included; add it with Register(Shell(...)).
func Builtins(workspaceRoot string) (*Registry, error) {
	ws, err := NewWorkspace(workspaceRoot)
	if err != nil {
		return nil, err
	}
	// The workspace stays open for the registry's lifetime, which is the
	// worker's.
	return NewRegistry(append([]Tool{Sleep(), AskUser()}, ws.Tools()...)...)
}
