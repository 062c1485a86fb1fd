package api

import "time"

// The Runtime workflow holds keel's runtime-wide lifecycle state in
// Temporal, so every client and worker shares it: once shut down, new
// sessions and runs are refused.
const (
	RuntimeWorkflowName = "Runtime"
	// RuntimeWorkflowID is the single Runtime workflow's ID.
	RuntimeWorkflowID = "keel-runtime"
	// UpdateShutdown is the Runtime workflow's update that shuts keel down.
	UpdateShutdown = "shutdown"
)

// ShutdownResult is the answer of the shutdown update.
type ShutdownResult struct {
	// Cancelled is the number of active runs cancelled by this call: the
	// first call's count; zero for every later call.
	Cancelled int `json:"cancelled"`
	// AlreadyShutDown is set on every call after the first.
	AlreadyShutDown bool      `json:"already_shut_down,omitempty"`
	At              time.Time `json:"at"`
}

// RuntimeStatus is the answer of the Runtime workflow's state query.
type RuntimeStatus struct {
	ShutDown bool      `json:"shut_down"`
	At       time.Time `json:"at,omitempty"`
}
