// Package tool defines keel's tool interface, a registry, and the built-in
// tools. A tool has a spec (name, description, JSON Schema of its
// arguments) and a Call method; optional interfaces add traits such as
// running detached. Each call runs as its own Temporal activity, except the
// workflow-native tools (sleep, ask_user, and agent__NAME, which runs a
// named agent as a child session) that a run's workflow code performs
// itself.
//
// Typed tools derive their schema from a Go type and get their arguments
// validated before they run:
//
//	type weatherArgs struct {
//		City  string `json:"city" jsonschema:"description=City name"`
//		Units string `json:"units,omitempty" jsonschema:"enum=metric,enum=imperial"`
//	}
//
//	weather := tool.New("weather", "Current weather for a city.",
//		func(ctx context.Context, args weatherArgs) (string, error) {
//			return lookup(ctx, args.City, args.Units)
//		})
//	reg, err := tool.Builtins("/srv/agent-workspace")
//	if err != nil { ... }
//	err = reg.Register(weather)
//
// A tool that needs the host's answer calls Ask before any side effect;
// the call is run again from the start once the host answered (see Ask).
package tool
