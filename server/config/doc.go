// Package config reads keel.yaml, a worker's configuration file: named
// models, the default model, scripts and the models clients may name, the
// workspace, the enabled built-in tools, approval policies per tool,
// limits, prices and budget ceilings, named agents, MCP servers, and the
// webhooks and HTTP sinks of docs/contract.md §23 (docs/config.md).
//
// Load reads and checks a file; every unknown field and bad value is
// refused with the file, line and field named (*Error). Apply turns the
// result into worker.Options:
//
//	cfg, err := config.Load("keel.yaml")
//	if err != nil {
//		log.Fatal(err) // keel.yaml:7:5: models.gpt.api_key: ...
//	}
//	opts := worker.Options{}
//	if err := cfg.Apply(&opts); err != nil {
//		log.Fatal(err)
//	}
//	w, err := worker.New(c, opts)
//
// A file never holds an API key or a secret: a model names the
// environment variable that holds its key (api_key_env), a hook or a sink
// the one that holds its signing secret (secret_env), read by the worker
// when it starts.
package config
