package worker

import (
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel/crypt"
)

// readOnlyQueries registers every query handler of the worker's workflows
// under crypt.ReadOnly: with encryption on, the worker's data converter
// (store.NewDataConverter, crypt.NewDataConverter) then decodes query
// arguments that readers without the keys send in the clear, while every
// other input (workflow input, signals, updates) must be ciphertext. A
// query changes nothing and never enters history. The context only
// selects a data converter: it issues no command, so histories replay as
// before.
type readOnlyQueries struct {
	interceptor.WorkerInterceptorBase
}

func (*readOnlyQueries) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &readOnlyInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type readOnlyInbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (i *readOnlyInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&readOnlyOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}})
}

type readOnlyOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
}

func (o *readOnlyOutbound) SetQueryHandler(ctx workflow.Context, queryType string, handler any) error {
	return o.Next.SetQueryHandler(crypt.ReadOnly(ctx), queryType, handler)
}

func (o *readOnlyOutbound) SetQueryHandlerWithOptions(ctx workflow.Context, queryType string, handler any,
	options workflow.QueryHandlerOptions) error {
	return o.Next.SetQueryHandlerWithOptions(crypt.ReadOnly(ctx), queryType, handler, options)
}
