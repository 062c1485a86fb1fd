// Command typed-tool is a complete keel worker that offers a tool of its
// own, convert_temperature, next to keel's built-in tools and, when
// --config names a keel.yaml with mcp_servers, the tools of those MCP
// servers. The tool is a plain Go function; keel derives its JSON Schema
// from the argument struct and checks every call against it.
//
//	go run ./server/examples/typed-tool --address localhost:7233 [--config keel.yaml]
//	keel run --model openai:gpt-4.1-mini --tools convert_temperature "What is 100 °C in °F?"
//
// (docs/tools.md; the README's "Write a tool".)
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"syscall"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel/server/config"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

// convertArgs are the tool's arguments. The json tags name the schema's
// properties (all required: none has omitempty); the jsonschema tags add
// descriptions and the allowed units.
type convertArgs struct {
	Value float64 `json:"value" jsonschema:"description=The temperature to convert"`
	From  string  `json:"from" jsonschema:"enum=C,enum=F,enum=K,description=Unit of value: C (Celsius)\\, F (Fahrenheit) or K (Kelvin)"`
	To    string  `json:"to" jsonschema:"enum=C,enum=F,enum=K,description=Unit to convert to"`
}

// convertTemperature is the tool's body. Arguments that passed the schema
// arrive decoded; a tool.Failf error is a result the model sees and can
// correct.
func convertTemperature(_ context.Context, a convertArgs) (string, error) {
	kelvin := map[string]func(float64) float64{
		"C": func(v float64) float64 { return v + 273.15 },
		"F": func(v float64) float64 { return (v-32)*5/9 + 273.15 },
		"K": func(v float64) float64 { return v },
	}[a.From](a.Value)
	if kelvin < 0 {
		return "", tool.Failf("%g %s is below absolute zero", a.Value, a.From)
	}
	out := map[string]func(float64) float64{
		"C": func(k float64) float64 { return k - 273.15 },
		"F": func(k float64) float64 { return (k-273.15)*9/5 + 32 },
		"K": func(k float64) float64 { return k },
	}[a.To](kelvin)
	return fmt.Sprintf("%g %s = %g %s", a.Value, a.From, math.Round(out*100)/100, a.To), nil
}

// ConvertTemperature returns the tool.
func ConvertTemperature() tool.Tool {
	return tool.New("convert_temperature",
		"Convert a temperature between Celsius (C), Fahrenheit (F) and Kelvin (K).",
		convertTemperature)
}

func main() {
	address := flag.String("address", "localhost:7233", "Temporal frontend `HOST:PORT`")
	namespace := flag.String("namespace", "default", "Temporal `namespace`")
	configPath := flag.String("config", "", "keel.yaml `FILE`: models, built-in tools, approvals, limits, MCP servers (docs/config.md)")
	workspace := flag.String("workspace", "workspace", "`DIR` of the file tools, unless the --config file names one")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *address, *namespace, *configPath, *workspace); err != nil {
		fmt.Fprintln(os.Stderr, "typed-tool:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, address, namespace, configPath, workspace string) error {
	opts := worker.Options{Namespace: namespace, Workspace: workspace}
	if configPath != "" {
		cfg, err := config.Load(configPath)
		if err != nil {
			return err
		}
		// Models, the enabled built-ins on the file's workspace, approvals,
		// limits and MCP servers.
		if err := cfg.Apply(&opts); err != nil {
			return err
		}
	}
	if opts.Tools == nil {
		if err := os.MkdirAll(opts.Workspace, 0o755); err != nil {
			return err
		}
		reg, err := tool.Builtins(opts.Workspace)
		if err != nil {
			return err
		}
		opts.Tools = reg
	}
	// The typed tool joins the built-ins; the MCP servers' tools are added
	// to the same registry when worker.New connects them.
	if err := opts.Tools.Register(ConvertTemperature()); err != nil {
		return err
	}

	c, err := sdkclient.Dial(sdkclient.Options{HostPort: address, Namespace: namespace})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := worker.EnsureSearchAttributes(ctx, c, namespace); err != nil {
		return err
	}
	w, err := worker.New(c, opts)
	if err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	fmt.Printf("typed-tool: worker polling on %s with tools %v\n", address, opts.Tools.Names())
	<-ctx.Done()
	return nil
}
