// Package api is keel's wire contract: the names and the JSON types that
// clients, the temporal CLI and other-language SDKs use to talk to keel's
// workflows through Temporal. The task queue, workflow types, update,
// signal and query names, their arguments and answers, the search
// attributes, the committed-sequence marker, and the limits and checks of
// what callers send (Limits, CheckOutputSchema, ValidateScheduleID) live
// here, and nothing else: the package depends on no workflow, activity,
// provider or server code, so a program that only submits prompts
// compiles none of them. What only keel's own workflows and workers say
// to one another (a session's carried state, delegation between sessions,
// the RateLimit and ScheduleRegistry workflows, the schedule activities)
// lives in keel's internal packages and may change with any release.
//
// A prompt is the "send" update on the Session workflow (ID = session ID),
// sent with update-with-start so the first one creates the session:
//
//	req := api.SendRequest{Prompt: "Summarize the workspace"}
//	// UpdateWithStartWorkflow(… WorkflowID: "s1", TaskQueue: api.TaskQueue,
//	//   workflow api.SessionWorkflowName, api.SessionInput{SessionID: "s1"},
//	//   update api.UpdateSend with req) answers an api.SendResult.
//
// Package client wraps all of it for Go; docs/contract.md says what each
// message does.
package api
