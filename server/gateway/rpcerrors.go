package gateway

import (
	"encoding/json"
	"net/http"
)

// JSON-RPC error codes of the MCP and A2A endpoints (docs/interop.md,
// "Errors"). The standard codes first, then A2A's, then keel's own in
// the range JSON-RPC leaves to servers. Each error's data carries the
// gateway's code, keel's code and whether a retry may succeed.
const (
	RPCParseError     = -32700
	RPCInvalidRequest = -32600
	RPCMethodNotFound = -32601
	RPCInvalidParams  = -32602
	RPCInternalError  = -32603
	// A2A's: no such task (or one another key's prefix holds), a task
	// that has ended cannot be cancelled, and an operation keel does not
	// offer (push notifications).
	RPCTaskNotFound         = -32001
	RPCTaskNotCancelable    = -32002
	RPCPushNotSupported     = -32003
	RPCUnsupportedOperation = -32004
	// keel's: the session is busy or no longer accepts the input
	// (keel.RunActive, keel.NotAccepting, keel.RequesterGone,
	// keel.RuntimeShutdown), and the gateway or Temporal is at a limit
	// (retry later).
	RPCConflict   = -32010
	RPCOverloaded = -32011
	RPCForbidden  = -32012
	// RPCHostInputUnsupported: the run asked for host input and the MCP
	// client cannot be asked (it declared no elicitation); the run is
	// cancelled.
	RPCHostInputUnsupported = -32013
)

// rpcFault is a JSON-RPC error object.
type rpcFault struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (f *rpcFault) Error() string { return f.Message }

// rpcErrorData is the data of every error the endpoints send.
type rpcErrorData struct {
	Code      string `json:"code"`
	KeelCode  string `json:"keel_code,omitempty"`
	Retryable bool   `json:"retryable,omitempty"`
}

// toRPCFault maps what a keel call returned to a JSON-RPC error, by the
// HTTP status the gateway gives the same error on its own routes, so the
// protocols and /v1 agree on what an error means.
func toRPCFault(err error) *rpcFault {
	if f, ok := err.(*rpcFault); ok {
		return f
	}
	e := fromError(err)
	code := int64(RPCInternalError)
	switch e.status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		code = RPCInvalidParams
	case http.StatusNotFound:
		code = RPCTaskNotFound
	case http.StatusConflict:
		code = RPCConflict
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		code = RPCOverloaded
	case http.StatusForbidden, http.StatusUnauthorized:
		code = RPCForbidden
	}
	return newRPCFault(code, e.Code, string(e.KeelCode), e.Retryable, e.Message)
}

func newRPCFault(code int64, gwCode, keelCode string, retryable bool, msg string) *rpcFault {
	data, _ := json.Marshal(rpcErrorData{Code: gwCode, KeelCode: keelCode, Retryable: retryable})
	return &rpcFault{Code: code, Message: msg, Data: data}
}
