// A TypeScript service driving a keel session with Temporal's SDK alone:
// no keel code. It sends a prompt (update-with-start "send" on the
// session's workflow), waits for the run's outcome (update "outcome") and
// reads the session's events (query "events"). docs/foreign-clients.md
// describes the names and shapes used here.
//
//   TEMPORAL_ADDRESS   host:port of the Temporal frontend (localhost:7233)
//   TEMPORAL_NAMESPACE namespace (default)
//   KEEL_SESSION       session ID, which is the workflow ID (ts-demo)
//   KEEL_PROMPT        the prompt (Say hello.)
//   KEEL_MODEL         model spec of the run's config (worker's default)
//
// It prints the outcome as JSON on a line "outcome: {...}" and the event
// types on a line "events: a b c".
//
// Assumes keel's codec is off (payloads plain JSON): with encryption or
// claim checks on, the client needs a payload codec that calls keel's codec
// endpoint (docs/foreign-clients.md). Events that the session keeps in its
// content store come as a "segment" reference instead of inline events;
// this example only reads inline events and stops at a segment.

import { Client, Connection, WithStartWorkflowOperation, WorkflowUpdateFailedError } from '@temporalio/client';

const address = process.env.TEMPORAL_ADDRESS || 'localhost:7233';
const namespace = process.env.TEMPORAL_NAMESPACE || 'default';
const sessionId = process.env.KEEL_SESSION || 'ts-demo';
const prompt = process.env.KEEL_PROMPT || 'Say hello.';
const model = process.env.KEEL_MODEL || '';

// Names from keel's api/names.go.
const SESSION_WORKFLOW = 'Session';
const TASK_QUEUE = 'keel';
const UPDATE_SEND = 'send';
const UPDATE_OUTCOME = 'outcome';
const QUERY_EVENTS = 'events';
const ERR_MOVED = 'keel.SessionMoved';

// The failure type of a failed update, or undefined.
function failureType(err) {
  if (!(err instanceof WorkflowUpdateFailedError)) return undefined;
  return err.cause && err.cause.type;
}

async function main() {
  const connection = await Connection.connect({ address });
  try {
    const client = new Client({ connection, namespace });

    // Send: start the session's workflow if it is not running (workflow
    // ID = session ID, input api.SessionInput) and send it the prompt
    // (api.SendRequest). The answer is api.SendResult.
    const config = { tools: [] };
    if (model) config.model = model;
    const start = new WithStartWorkflowOperation(SESSION_WORKFLOW, {
      workflowId: sessionId,
      taskQueue: TASK_QUEUE,
      args: [{ session_id: sessionId, inline: true }],
      workflowIdConflictPolicy: 'USE_EXISTING',
      // A closed session is not silently replaced by an empty one.
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
    });
    const sent = await client.workflow.executeUpdateWithStart(UPDATE_SEND, {
      args: [{ prompt, config }],
      startWorkflowOperation: start,
    });
    console.log(`sent: ${JSON.stringify(sent)}`);

    // Outcome: wait for the run to be committed (api.OutcomeRequest; the
    // answer is keel.Outcome). The run continues the session as new when
    // it ends; an execution that moves on before answering fails the
    // update with keel.SessionMoved: send it again, it reaches the next
    // execution. The handle names no run ID, so it always addresses the
    // session's current execution.
    const session = client.workflow.getHandle(sessionId);
    let outcome;
    for (;;) {
      try {
        outcome = await session.executeUpdate(UPDATE_OUTCOME, { args: [{ run: sent.number }] });
        break;
      } catch (err) {
        if (failureType(err) !== ERR_MOVED) throw err;
      }
    }
    console.log(`outcome: ${JSON.stringify(outcome)}`);

    // Events: page through the session's log (api.EventsQuery, answered
    // with api.EventsPage) from the start.
    const types = [];
    let after = 0;
    for (;;) {
      const page = await session.query(QUERY_EVENTS, { after });
      if (page.segment) {
        // Stored events: read them from keel's content store (or with
        // keel's client); this example stops here.
        console.log(`segment: ${JSON.stringify(page.segment)}`);
        break;
      }
      for (const ev of page.events) {
        types.push(ev.type);
        after = ev.seq;
      }
      if (!page.more || page.events.length === 0) break;
    }
    console.log(`events: ${types.join(' ')}`);
    if (outcome.status !== 'completed') process.exitCode = 2;
  } finally {
    await connection.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
