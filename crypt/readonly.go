package crypt

import (
	"context"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

// Queries are the one input of a workflow that needs no ciphertext: they
// change nothing and never enter history, and readers without the keys
// send their arguments in the clear (the Temporal Web UI, `temporal
// workflow query --input`, keel's commands that read through a codec
// endpoint). So a worker's data converter decodes the arguments of the
// query handlers registered under a ReadOnly context as AllowPlaintext
// would, and everything else (workflow input, signals, updates, results)
// as ciphertext only. keel's worker registers every query handler so
// (worker.New's interceptor).

// readOnlyKey marks a workflow context whose handlers take read-only
// arguments.
type readOnlyKey struct{}

// ReadOnly returns ctx marked for query handlers: a data converter from
// NewDataConverter, WithReadOnlyDecoding or store.NewDataConverter decodes
// the arguments of handlers registered under it with plaintext allowed.
func ReadOnly(ctx workflow.Context) workflow.Context {
	return workflow.WithValue(ctx, readOnlyKey{}, true)
}

// AllowingPlaintext returns a codec over the same keys whose Decode lets
// payloads that are not encrypted through (AllowPlaintext).
func (c *Codec) AllowingPlaintext() *Codec {
	cp := *c
	cp.allowPlaintext = true
	return &cp
}

// WithReadOnlyDecoding returns dc, which decodes under a ReadOnly workflow
// context as readOnly does instead (the same converter over a codec that
// allows plaintext).
func WithReadOnlyDecoding(dc, readOnly converter.DataConverter) converter.DataConverter {
	return readOnlyAware{DataConverter: dc, readOnly: readOnly}
}

type readOnlyAware struct {
	converter.DataConverter
	readOnly converter.DataConverter
}

var _ converter.ContextAware = readOnlyAware{}

func (d readOnlyAware) WithWorkflowContext(ctx converter.WorkflowContext) converter.DataConverter {
	if ctx != nil && ctx.Value(readOnlyKey{}) != nil {
		return d.readOnly
	}
	return d
}

func (d readOnlyAware) WithContext(context.Context) converter.DataConverter { return d }
