// Package transcript reduces a session's events to what a person watching
// it sees: each run's steps with the text of the attempt still live, its
// tool cards, its host-input questions, its steering, its usage and how it
// ended. Every renderer of keel's events uses it (the CLI's, the gateway's
// AG-UI translation; the web page's JavaScript follows the same rules), so
// the rules of docs/contract.md that concern display live in one place:
//
//   - A durable event whose sequence is not after the last one applied is
//     a repeat, and ignored (docs/contract.md §14.1).
//   - provider.stream_reset drops the text, reasoning and tool-call drafts
//     of the attempt it names, and the deltas of that attempt and earlier
//     ones that arrive later (§4.5). A delta of a later attempt than the
//     live one drops the live attempt's output the same way.
//   - Deltas count only for the run's current step (the last step.started)
//     and until the attempt's model_call.completed; after it the response
//     is final (§1.4).
//   - A use of a hosted tool (hosted_tool.activity: a web search, code
//     execution or file search the model's backend ran itself) goes on
//     its step, as output of its attempt: one of an attempt reset or
//     superseded is not shown, a later reset drops it, and a second use
//     with the same ID is a duplicate. Its URLs are kept up to MaxURLs.
//   - A tool card goes proposed, running (tool.started), detached, then
//     its tool.finished status; a call that never ran gets its status
//     alone (§2.5–§2.7). Progress notes count until it finishes.
//   - A host-input question is open until host_input.resolved answers or
//     interrupts it; the run waits for host input while any is open (§6).
//   - Steering is staged until applied or retracted (§5).
//   - Usage is the running total of usage.updated, abandoned requests
//     included (§4.5), hosted web searches counted with the tokens;
//     run.completed adds the kept usage. Its cost (per
//     currency, in nanos, naming the price table) and its count of
//     unpriced requests appear only when it has them (§20.2).
//   - budget.warning is a fact of its run, kept in order, one per limit
//     (scope, who set it, currency): a second for the same limit is a
//     duplicate (§20.3). A run a budget stopped ends with run.failed,
//     code keel.BudgetExceeded.
//   - model.waiting says the live attempt waits for its turn under a rate
//     limit (§20.5): the step shows the limit and the wait until the
//     attempt's first delta, its model_call.completed, a reset, or the
//     run's end. It follows the rules of deltas; a notice of an attempt
//     that has streamed output is stale, a wait of zero adds nothing and
//     a negative one is invalid.
//   - A hook's facts (boundary_input.applied, hook.decided, hook.failed;
//     §23) are durable facts of their run, drawn once as they come: the
//     view keeps none of them.
//   - The terminal event ends the run: nothing of it counts after (§2.11).
//
// Input is never trusted: the reducer takes any sequence of envelopes
// (out of order, repeated, of unknown types, naming attempts or calls it
// never saw, with huge fields) without panicking. Durable facts about
// things it has not seen (a tool.finished without tool.proposed, events
// of a run whose run.started it missed) are taken as they come, so a view
// can start mid-run; repeats, undecodable events and deltas that do not
// belong to the live attempt change nothing, and Change.Ignored says why.
// Text kept in the view is cut at MaxText and other fields at MaxField,
// while Change.Text always carries a delta's whole text.
//
// A renderer feeds every envelope to Apply and draws what the Change
// says:
//
//	tr := transcript.New()
//	for env, err := range run.Events(ctx) {
//		if err != nil {
//			return err
//		}
//		ch := tr.Apply(env)
//		switch {
//		case ch.Ignored != "":
//			// nothing to draw
//		case ch.Kind == transcript.KindText:
//			fmt.Print(ch.Text)
//		case ch.Kind == transcript.KindEnd:
//			fmt.Println("\n", ch.Run.Status)
//		}
//	}
//
// The recorded streams in testdata, each with the view it must reduce to,
// are replayed by this package's tests and, in a browser, by the gateway's
// tests of the web page's reducer.
package transcript
