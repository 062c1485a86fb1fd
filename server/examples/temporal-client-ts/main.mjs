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
//   KEEL_RUNS          how many times to send it, each after the last run
//                      ended (1)
//   KEEL_OUTCOME_OF    the run whose outcome to print (the last one sent);
//                      a session answers any of its last 64 runs
//   KEEL_MODEL         model spec of the run's config (worker's default)
//   KEEL_CODEC_ENDPOINT keel's codec endpoint (http://127.0.0.1:7280/codec
//                      under keel dev); unset: payloads plain JSON
//   KEEL_CODEC_TOKEN   bearer token of the codec endpoint, if it has one
//
// It prints the outcome as JSON on a line "outcome: {...}" and the event
// types on a line "events: a b c". A final text over 2 KiB comes cut from
// the outcome update ("text_cut": true); the run's terminal event, at
// "seq", holds it whole, and the example prints that text on a line
// "full_text: ..." when it can read the event.
//
// With KEEL_CODEC_ENDPOINT set, payloads go through keel's codec endpoint
// (Temporal's remote codec protocol): what the client sends is encoded
// there (encrypted, when keel encrypts) and what it reads is decoded there
// (values over 4 KiB, which keel moves to its content store, and
// ciphertext). Without it, only small plaintext values can be read. Events that the session keeps in its
// content store come as a "segment" reference instead of inline events;
// this example only reads inline events and stops at a segment.

import { Client, Connection, WithStartWorkflowOperation, WorkflowUpdateFailedError } from '@temporalio/client';

const address = process.env.TEMPORAL_ADDRESS || 'localhost:7233';
const namespace = process.env.TEMPORAL_NAMESPACE || 'default';
const sessionId = process.env.KEEL_SESSION || 'ts-demo';
const prompt = process.env.KEEL_PROMPT || 'Say hello.';
const model = process.env.KEEL_MODEL || '';
const runs = Number(process.env.KEEL_RUNS || '1');
const outcomeOf = Number(process.env.KEEL_OUTCOME_OF || '0');

// Names from keel's api/names.go.
const SESSION_WORKFLOW = 'Session';
const TASK_QUEUE = 'keel';
const UPDATE_SEND = 'send';
const UPDATE_OUTCOME = 'outcome';
const QUERY_EVENTS = 'events';
const ERR_MOVED = 'keel.SessionMoved';

// A PayloadCodec that calls keel's codec endpoint: POST <endpoint>/encode
// and <endpoint>/decode with {"payloads": [...]} in protobuf JSON.
class RemoteCodec {
  constructor(endpoint, token) {
    this.endpoint = endpoint.replace(/\/+$/, '');
    this.token = token;
  }
  encode(payloads) { return this.call('encode', payloads); }
  decode(payloads) { return this.call('decode', payloads); }
  async call(op, payloads) {
    if (payloads.length === 0) return payloads;
    const b64 = (u8) => Buffer.from(u8 || []).toString('base64');
    const body = {
      payloads: payloads.map((p) => ({
        metadata: Object.fromEntries(Object.entries(p.metadata || {}).map(([k, v]) => [k, b64(v)])),
        data: b64(p.data),
      })),
    };
    const headers = { 'Content-Type': 'application/json' };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    const res = await fetch(`${this.endpoint}/${op}`, { method: 'POST', headers, body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`keel codec ${op}: ${res.status} ${await res.text()}`);
    const out = await res.json();
    const u8 = (s) => new Uint8Array(Buffer.from(s || '', 'base64'));
    return (out.payloads || []).map((p) => ({
      metadata: Object.fromEntries(Object.entries(p.metadata || {}).map(([k, v]) => [k, u8(v)])),
      data: u8(p.data),
    }));
  }
}

// The failure type of a failed update, or undefined.
function failureType(err) {
  if (!(err instanceof WorkflowUpdateFailedError)) return undefined;
  return err.cause && err.cause.type;
}

async function main() {
  const connection = await Connection.connect({ address });
  try {
    const codecEndpoint = process.env.KEEL_CODEC_ENDPOINT;
    const dataConverter = codecEndpoint
      ? { payloadCodecs: [new RemoteCodec(codecEndpoint, process.env.KEEL_CODEC_TOKEN)] }
      : undefined;
    const client = new Client({ connection, namespace, dataConverter });

    // Send: start the session's workflow if it is not running (workflow
    // ID = session ID, input api.SessionInput) and send it the prompt
    // (api.SendRequest). The answer is api.SendResult.
    const config = { tools: [] };
    if (model) config.model = model;
    // A start operation is used once: each send makes its own.
    const start = () => new WithStartWorkflowOperation(SESSION_WORKFLOW, {
      workflowId: sessionId,
      taskQueue: TASK_QUEUE,
      args: [{ session_id: sessionId, shape: 1 }],
      workflowIdConflictPolicy: 'USE_EXISTING',
      // A closed session is not silently replaced by an empty one.
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
    });
    // Outcome: wait for a run to be committed (api.OutcomeRequest; the
    // answer is keel.Outcome). The run continues the session as new when
    // it ends; an execution that moves on before answering fails the
    // update with keel.SessionMoved: send it again, it reaches the next
    // execution. The handle names no run ID, so it always addresses the
    // session's current execution.
    const session = client.workflow.getHandle(sessionId);
    const outcomeOfRun = async (run) => {
      for (;;) {
        try {
          return await session.executeUpdate(UPDATE_OUTCOME, { args: [{ run }] });
        } catch (err) {
          if (failureType(err) !== ERR_MOVED) throw err;
        }
      }
    };
    let outcome;
    for (let i = 0; i < runs; i++) {
      // The first send starts the session's workflow; the later ones
      // find it running (USE_EXISTING).
      const sent = await client.workflow.executeUpdateWithStart(UPDATE_SEND, {
        args: [{ prompt, config }],
        startWorkflowOperation: start(),
      });
      console.log(`sent: ${JSON.stringify(sent)}`);
      outcome = await outcomeOfRun(sent.number);
    }
    if (outcomeOf > 0) outcome = await outcomeOfRun(outcomeOf);
    console.log(`outcome: ${JSON.stringify(outcome)}`);

    // Events: page through the session's log (api.EventsQuery, answered
    // with api.EventsPage) from the start.
    const types = [];
    let after = 0;
    let fullText;
    for (;;) {
      let page;
      try {
        page = await session.query(QUERY_EVENTS, { after });
      } catch (err) {
        // A page over 4 KiB is in keel's content store: without the codec
        // endpoint it cannot be decoded here.
        console.log(`events_error: ${err.message}`);
        break;
      }
      if (page.segment) {
        // Stored events: read them from keel's content store (or with
        // keel's client); this example stops here.
        console.log(`segment: ${JSON.stringify(page.segment)}`);
        break;
      }
      for (const ev of page.events) {
        types.push(ev.type);
        after = ev.seq;
        if (outcome.text_cut && ev.seq === outcome.seq) fullText = ev.data.text;
      }
      if (!page.more || page.events.length === 0) break;
    }
    console.log(`events: ${types.join(' ')}`);
    if (fullText !== undefined) console.log(`full_text: ${JSON.stringify(fullText)}`);
    if (outcome.status !== 'completed') process.exitCode = 2;
  } finally {
    await connection.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
