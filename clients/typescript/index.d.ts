// Types of @keelrun/client. Field names are the wire's (docs/gateway.md,
// server/gateway/openapi.json); each interface named after an OpenAPI schema has
// exactly that schema's fields, which server/e2e/clients_test.go checks.

/** An error body of the gateway. */
export interface Error {
  code: string;
  message: string;
  keel_code?: string;
  retryable?: boolean;
}

/** A tool's approval policy. */
export type Approval = "allow" | "ask" | "deny";

/**
 * A budget (docs/contract.md §20): money (max with currency), tokens
 * (max_tokens, prompt and answer), or both.
 */
export interface Budget {
  max?: number;
  currency?: string;
  max_tokens?: number;
  /** Fraction that brings a budget.warning event; default 0.8. */
  warn_at?: number;
}

/** POST /v1/sessions/{id}/runs. */
export interface RunRequest {
  prompt: string;
  model?: string;
  tools?: string[];
  system?: string;
  max_steps?: number;
  approvals?: Record<string, Approval>;
  /** Most this run may spend; the worker's ceiling applies on top. */
  budget?: Budget;
  /** Most the session's runs may spend together. */
  session_budget?: Budget;
  /**
   * A JSON Schema the final answer must match (docs/contract.md §21.1); the
   * outcome's `answer` and run.completed's `answer` carry the parsed answer.
   */
  output_schema?: Record<string, unknown>;
  /** Run as the worker's agent of this name (docs/contract.md §21.2); then no model, system, tools or output_schema. */
  agent?: string;
  if_active?: "reject" | "queue" | "steer";
  /**
   * Make model, tools, system, max_steps and approvals the session's
   * defaults too, from this run on; without it they apply to this run only.
   */
  set_default?: boolean;
  /**
   * The caller's key for this prompt (docs/contract.md §11.7): a request
   * repeated with the same key starts nothing and answers the first one's
   * run with `repeated`. 1 to 256 bytes.
   */
  once?: string;
}

export interface RunResponse {
  run_id: string;
  number: number;
  revision: number;
  /** The last durable seq before the run's first event: stream with after = base_seq. */
  base_seq: number;
  queued?: boolean;
  steering_id?: string;
  /** The request's `once` key was taken before: this is the first request's run. */
  repeated?: boolean;
}

export type SessionState =
  | "idle" | "running" | "waiting_for_host_input" | "cancelling" | "completed" | "failed" | "terminated";

/** An amount of money in one currency (docs/contract.md §20): exact nanos (billionths of the unit), never converted. */
export interface Cost {
  currency: string;
  nanos: number;
  /** The price table it was computed from: an estimate from list prices, never a bill; "mixed" for a sum over two. */
  prices?: string;
}

/** Tokens, provider requests and their cost (docs/contract.md §4, §20). */
export interface Usage {
  input_tokens?: number;
  output_tokens?: number;
  cache_read_tokens?: number;
  cache_write_tokens?: number;
  reasoning_tokens?: number;
  requests?: number;
  /** One entry per currency; absent when no request had a price. */
  cost?: Cost[];
  /** Requests whose model had no price: cost is then a lower bound. */
  unpriced?: number;
}

export interface SessionStatus {
  session_id: string;
  state: SessionState;
  revision?: number;
  last_seq?: number;
  runs?: number;
  active_run?: {
    run_id?: string;
    number?: number;
    base_seq?: number;
  };
  queued?: number;
  usage?: Usage;
  last_outcome?: Record<string, unknown>;
  shutdown?: boolean;
  hand_overs?: number;
  closed?: Record<string, unknown>;
  /** Where the session was forked from (docs/contract.md §19). To an API
   * key limited to a prefix that does not cover the source, `source` is
   * empty and `seq` 0, here and in `session.forked`. */
  parent?: Record<string, unknown>;
  /** Set on a child session: who delegated to it (docs/contract.md §21.3). */
  delegated?: Record<string, unknown>;
}

export interface HistoryPage {
  messages?: Array<Record<string, unknown>>;
  offset?: number;
  total?: number;
  revision?: number;
}

/** The JSON envelope of every event (docs/contract.md §1.2). */
export interface Envelope<T extends string = string, D = unknown> {
  /** Durable events only. */
  seq?: number;
  type: T;
  session_id: string;
  run_id?: string;
  at: string;
  /** Deltas only: the last durable seq before them. */
  after_seq?: number;
  /** Deltas relayed from a child session only: its path (docs/contract.md §21.4). */
  path?: string;
  data: D;
}

/** A durable event: it has a seq. */
export type Durable<T extends string, D> = Envelope<T, D> & { seq: number };
/** An ephemeral event (a delta): no seq, an after_seq. */
export type Delta<T extends string, D> = Envelope<T, D> & { after_seq: number };

export type ToolStatus = "ok" | "error" | "unavailable" | "interrupted";

/** keel's events with their data (docs/contract.md §1); any other type is an Envelope. */
export type KeelEvent =
  | Durable<"run.started", { number: number; revision: number; prompt: string; model: string }>
  | Durable<"step.started", { step: number; estimated_context_tokens: number }>
  | Durable<"run.completed", { revision: number; text: string; steps: number; usage: Usage; usage_total?: Usage; answer?: unknown }>
  | Durable<"run.cancelled", { revision: number; usage_total?: Usage }>
  | Durable<"run.failed", { code: string; message: string; retryable: boolean; revision: number; usage_total?: Usage }>
  | Durable<"usage.updated", { step: number; attempt: number; usage: Usage; total: Usage }>
  | Durable<"budget.warning", { step: number; scope: "run" | "session"; set: "caller" | "worker"; currency?: string; limit: number; spent: number }>
  | Durable<"tool.proposed", { tool_call_id: string; name: string; arguments: unknown; step: number }>
  | Durable<"tool.started", { tool_call_id: string; name: string }>
  | Durable<"tool.finished", { tool_call_id: string; name: string; status: ToolStatus; output: string; duration?: string }>
  | Durable<"tool.detached", { tool_call_id: string; name: string }>
  | Durable<"steering.accepted", { steering_id: string; text: string }>
  | Durable<"steering.applied", { steering_id: string }>
  | Durable<"steering.retracted", { steering_id: string }>
  | Durable<"host_input.requested", { request_id: string; tool_call_id: string; prompt: string; schema?: unknown }>
  | Durable<"host_input.resolved", { request_id: string; tool_call_id: string; interrupted?: boolean }>
  | Durable<"agent.started", { tool_call_id: string; agent: string; session_id: string; path: string }>
  | Durable<"agent.finished", { tool_call_id: string; agent: string; session_id: string; path: string; status: string; steps: number; usage: Usage; error?: Record<string, unknown> }>
  | Durable<"session.forked", { source: string; run: number; step?: number; revision: number; seq: number; messages: number }>
  | Durable<"session.rewound", { from_run: number; from_revision: number; to_run: number; to_step?: number; revision: number; messages: number }>
  | Delta<"text.delta", { step: number; attempt: number; text: string }>
  | Delta<"reasoning.delta", { step: number; attempt: number; text: string }>
  | Delta<"tool_call.delta", { step: number; attempt: number; index: number; id?: string; name?: string; arguments?: string }>
  /** The step waits for its turn under a rate limit (docs/contract.md §20.5); wait is a Go duration such as "4.2s". */
  | Delta<"model.waiting", { step: number; attempt: number; limit: string; wait: string }>
  | Envelope;

/** Deltas were lost to a slow reader; the durable events that follow carry what they showed. */
export interface LagNotice {
  type: "lag";
  missed: number;
  last_seq: number;
}

export type StreamItem = KeelEvent | LagNotice;

export interface EventsPage {
  events: Envelope[];
  more: boolean;
  /** The after of the next page. */
  next_after: number;
}

export interface SteerRequest {
  text: string;
}

export interface SteerResponse {
  steering_id: string;
  run_id: string;
}

export interface RetractResponse {
  result: "retracted" | "already_applied" | "not_found";
  run_id: string;
}

export interface RespondRequest {
  request_id: string;
  answer: unknown;
}

export interface StatusResponse {
  status: "delivered" | "cancel_requested" | "paused" | "unpaused" | "triggered" | "deleted";
  run_id?: string;
}

export interface HostRequest {
  request_id?: string;
  tool_call_id?: string;
  prompt?: string;
  schema?: unknown;
  /** A child session's request (docs/contract.md §21.4): its path; request_id is PATH:ID. */
  path?: string;
  /** The child session that asked. */
  session_id?: string;
}

export interface RequestsResponse {
  requests: HostRequest[];
  run_id?: string;
}

/** A point of a session: after run `run` (0: before the first), or after step `step` of it. */
export interface ForkRequest {
  run: number;
  step?: number;
  /** The new session's ID; generated when left out. */
  into?: string;
}

export interface ForkResponse {
  session_id: string;
  parent: {
    source: string;
    run: number;
    step?: number;
    revision: number;
    seq: number;
  };
}

export interface RewindRequest {
  run: number;
  step?: number;
}

export interface RewindResponse {
  from_run: number;
  from_revision: number;
  revision: number;
  /** The session.rewound event's seq. */
  seq: number;
  /** The transcript's length after the rewind. */
  messages: number;
}

/** The forks of a session, sorted by ID; each one's point is its own `parent`. */
export interface ForksResponse {
  forks: Array<{
    session_id: string;
  }>;
  /** More forks exist than the limit (under the key's prefix, for a key limited to one). */
  truncated: boolean;
}

export interface SessionsResponse {
  sessions: Array<{
    id: string;
    /** Temporal's status of the session's workflow (running between runs too). */
    status: string;
    /** keel's state, as the visibility store last saw it. */
    state: SessionState;
    /** A run is in progress, so it can be cancelled. */
    active: boolean;
    started_at: string;
  }>;
  namespace: string;
  web_ui?: string;
}

/**
 * A schedule's run configuration: for each firing's run only. `agent`
 * names one of the worker's agents, which defines the model, instructions
 * and tools (docs/contract.md §21.2).
 */
export interface ScheduleConfig {
  agent?: string;
  model?: string;
  tools?: string[];
  system?: string;
  max_steps?: number;
  approvals?: Record<string, Approval>;
  budget?: Budget;
  session_budget?: Budget;
}

/**
 * A schedule (docs/contract.md §22): `prompt` sent at the times of `cron`,
 * every `every`, or both. Durations are Go duration strings ("1h30m").
 */
export interface Schedule {
  id: string;
  cron?: string;
  every?: string;
  /** IANA time zone of cron; default UTC. */
  timezone?: string;
  jitter?: string;
  prompt: string;
  /** Default: the session named like the schedule. */
  session?: string;
  /** A new session each firing, named ID-YYYYMMDDTHHMMSSZ. */
  new_session?: boolean;
  config?: ScheduleConfig;
  overlap?: "skip" | "queue" | "steer";
  pause_on_failure?: boolean;
  /** Default 10m. */
  catchup_window?: string;
}

/** PATCH /v1/schedules/{name}: each field given replaces the schedule's. */
export interface ScheduleChange {
  cron?: string;
  every?: string;
  timezone?: string;
  jitter?: string;
  prompt?: string;
  session?: string;
  new_session?: boolean;
  config?: ScheduleConfig;
  overlap?: "skip" | "queue" | "steer";
  pause_on_failure?: boolean;
  catchup_window?: string;
}

export interface ScheduleNote {
  note?: string;
}

/** keel's typed error: code (keel.InvalidInput, keel.ProviderError...) and message. */
export interface KeelError {
  code: string;
  message: string;
  retryable?: boolean;
  provider?: Record<string, unknown>;
}

/** What a firing did. */
export interface ScheduledSendResult {
  session: string;
  run_id?: string;
  number?: number;
  queued?: boolean;
  steering_id?: string;
  /** A run was active and the schedule skips. */
  skipped?: boolean;
  outcome?: Record<string, unknown>;
  /** A limit of the worker refused the firing: nothing was sent. */
  refused?: KeelError;
}

export interface ScheduleFiring {
  scheduled_at: string;
  started_at: string;
  workflow_id: string;
  status: "sending" | "sent" | "skipped" | "failed" | "refused";
  result?: ScheduledSendResult;
  run?: "active" | "completed" | "failed" | "cancelled";
  error?: KeelError;
}

export interface ScheduleStatus {
  schedule: Schedule;
  paused: boolean;
  note?: string;
  paused_by_failure?: boolean;
  failure?: KeelError;
  /** The next firing times (none while paused). */
  next: string[];
  /** The latest firings, oldest first. */
  recent: ScheduleFiring[];
  fired: number;
  missed?: number;
  created: string;
  updated?: string;
}

export interface ScheduleSummary {
  id: string;
  paused: boolean;
  note?: string;
  next?: string;
  last?: string;
}

export interface SchedulesResponse {
  schedules: ScheduleSummary[];
  truncated: boolean;
}

export interface ClientOptions {
  /** A bearer key, when the gateway has keys. */
  apiKey?: string;
  /** Default: globalThis.fetch. */
  fetch?: typeof fetch;
  /** Sent with every request. */
  headers?: Record<string, string>;
}

/** Selects a run other than the active one (?run=N). */
export interface RunOption {
  run?: number;
}

export interface EventsOptions {
  /** Stream durable events after this seq (default 0: the whole log). */
  after?: number;
  /** Resume after this durable seq (sent as Last-Event-ID; wins over after). */
  lastEventId?: string | number;
  signal?: AbortSignal;
  /** Reconnect with Last-Event-ID when the stream breaks (default true). */
  reconnect?: boolean;
  /** Consecutive reconnects before giving up (default 10). */
  maxReconnects?: number;
  /** Milliseconds before reconnecting (default: the stream's retry, 1000). */
  reconnectDelay?: number;
}

export declare const DEFAULT_BASE_URL: string;

export declare class KeelClient {
  constructor(baseURL?: string, options?: ClientOptions);
  readonly baseURL: string;
  sessions(options?: { limit?: number }): Promise<SessionsResponse>;
  send(sessionId: string, request: string | RunRequest): Promise<RunResponse>;
  state(sessionId: string): Promise<SessionStatus>;
  history(sessionId: string, options?: { offset?: number; limit?: number }): Promise<HistoryPage>;
  eventsPage(sessionId: string, options?: { after?: number; limit?: number }): Promise<EventsPage>;
  events(sessionId: string, options?: EventsOptions): EventStream;
  steer(sessionId: string, text: string, options?: RunOption): Promise<SteerResponse>;
  retractSteering(sessionId: string, steeringId: string, options?: RunOption): Promise<RetractResponse>;
  respond(sessionId: string, requestId: string, answer: unknown, options?: RunOption): Promise<StatusResponse>;
  cancel(sessionId: string, options?: RunOption): Promise<StatusResponse>;
  requests(sessionId: string, options?: RunOption): Promise<RequestsResponse>;
  /** Forks the session at a run or step into a new session (POST /v1/sessions/{id}/fork). */
  fork(sessionId: string, point: ForkRequest): Promise<ForkResponse>;
  /** Makes the session go on from an earlier run or step (POST /v1/sessions/{id}/rewind). */
  rewind(sessionId: string, point: RewindRequest): Promise<RewindResponse>;
  /** The sessions forked from this one, as Temporal's visibility has them (GET /v1/sessions/{id}/forks). */
  forks(sessionId: string, options?: { limit?: number }): Promise<ForksResponse>;
  /** keel's schedules, as Temporal's visibility has them (GET /v1/schedules). */
  schedules(options?: { limit?: number }): Promise<SchedulesResponse>;
  /** Creates a schedule; a keel worker checks it first (POST /v1/schedules). */
  createSchedule(schedule: Schedule): Promise<ScheduleStatus>;
  /** A schedule's description (GET /v1/schedules/{name}). */
  schedule(name: string): Promise<ScheduleStatus>;
  /** Changes a schedule (PATCH /v1/schedules/{name}). */
  updateSchedule(name: string, change: ScheduleChange): Promise<ScheduleStatus>;
  /** Deletes a schedule; its sessions stay (DELETE /v1/schedules/{name}). */
  deleteSchedule(name: string): Promise<StatusResponse>;
  pauseSchedule(name: string, options?: ScheduleNote): Promise<StatusResponse>;
  unpauseSchedule(name: string, options?: ScheduleNote): Promise<StatusResponse>;
  /** Fires a schedule now (POST /v1/schedules/{name}/trigger). */
  triggerSchedule(name: string): Promise<StatusResponse>;
  /** One call; a success's raw Response, else a typed KeelError. */
  request(method: string, path: string, init?: {
    query?: Record<string, unknown>; body?: unknown; headers?: Record<string, string>; signal?: AbortSignal;
  }): Promise<Response>;
}

export declare class EventStream implements AsyncIterable<StreamItem> {
  /** The seq of the last durable event yielded (what a reconnect sends as Last-Event-ID). */
  readonly lastEventId: string | undefined;
  /** How many times the stream reconnected. */
  readonly reconnects: number;
  close(): void;
  [Symbol.asyncIterator](): AsyncIterator<StreamItem>;
}

/** An error answer of the gateway (status and body), or status 0: no answer. */
export declare class KeelError extends globalThis.Error {
  constructor(status: number, body: Partial<Error>, extra?: { retryAfter?: number; cause?: unknown });
  readonly status: number;
  /** The body's code: run_active, not_found, invalid_input, ..., or "connection". */
  readonly code: string;
  readonly keelCode?: string;
  retryable: boolean;
  /** Seconds, from Retry-After. */
  readonly retryAfter?: number;
}
export declare class BadRequestError extends KeelError {}
export declare class UnauthorizedError extends KeelError {}
export declare class ForbiddenError extends KeelError {}
export declare class NotFoundError extends KeelError {}
export declare class ConflictError extends KeelError {}
export declare class TooLargeError extends KeelError {}
export declare class TooManyRequestsError extends KeelError {}
export declare class UnavailableError extends KeelError {}
export declare class ConnectionError extends KeelError {}

export declare function errorFrom(status: number, body: unknown, retryAfter?: string | null): KeelError;
export declare function parseSSE(body: AsyncIterable<Uint8Array>, onRetry?: (ms: number) => void):
  AsyncGenerator<{ id?: string; event: string; data: string }>;
export declare function isDurable(event: unknown): event is { seq: number };
export declare function isTerminal(event: unknown): boolean;
