"""Types of the gateway's bodies and events.

Field names are the wire's (docs/gateway.md, server/gateway/openapi.json). Each
TypedDict named after an OpenAPI schema has exactly that schema's fields
(tests/test_routes.py checks them against routes.json, and
server/e2e/clients_test.go checks routes.json against the document).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, NotRequired, Optional, TypedDict

Approval = Literal["allow", "ask", "deny"]
SessionState = Literal["idle", "running", "waiting_for_host_input", "cancelling", "completed", "failed", "terminated"]


class Error(TypedDict):
    code: str
    message: str
    keel_code: NotRequired[str]
    retryable: NotRequired[bool]


class Budget(TypedDict):
    """A budget (docs/contract.md §20): money (max with currency), tokens
    (max_tokens, prompt and answer), or both."""
    max: NotRequired[float]
    currency: NotRequired[str]
    max_tokens: NotRequired[int]
    #: Fraction that brings a budget.warning event; default 0.8.
    warn_at: NotRequired[float]


class Cost(TypedDict):
    """An amount of money in one currency (docs/contract.md §20): exact
    nanos (billionths of the unit), never converted."""
    currency: str
    nanos: int
    #: The price table it was computed from: an estimate from list prices,
    #: never a bill; "mixed" for a sum over two.
    prices: NotRequired[str]


class Usage(TypedDict, total=False):
    """Tokens, provider requests and their cost (docs/contract.md §4, §20)."""
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    reasoning_tokens: int
    requests: int
    #: One entry per currency; absent when no request had a price.
    cost: List[Cost]
    #: Requests whose model had no price: cost is then a lower bound.
    unpriced: int


class BudgetWarning(TypedDict):
    """The data of a budget.warning event (docs/contract.md §20): money
    in nanos of currency, or tokens (no currency)."""
    step: int
    scope: Literal["run", "session"]
    set: Literal["caller", "worker"]
    currency: NotRequired[str]
    limit: int
    spent: int


class RunRequest(TypedDict):
    prompt: str
    model: NotRequired[str]
    tools: NotRequired[List[str]]
    system: NotRequired[str]
    max_steps: NotRequired[int]
    approvals: NotRequired[Dict[str, Approval]]
    budget: NotRequired[Budget]
    session_budget: NotRequired[Budget]
    #: A JSON Schema the final answer must match (docs/contract.md §21.1);
    #: the outcome's "answer" carries the parsed answer.
    output_schema: NotRequired[Dict[str, Any]]
    #: Run as the worker's agent of this name (docs/contract.md §21.2);
    #: then no model, system, tools or output_schema.
    agent: NotRequired[str]
    if_active: NotRequired[Literal["reject", "queue", "steer"]]
    #: Make model, tools, system, max_steps and approvals the session's
    #: defaults too, from this run on; without it they apply to this run only.
    set_default: NotRequired[bool]
    #: The caller's key for this prompt (docs/contract.md §11.7): a request
    #: repeated with the same key starts nothing and answers the first
    #: one's run with "repeated". 1 to 256 bytes.
    once: NotRequired[str]


class RunResponse(TypedDict):
    run_id: str
    number: int
    revision: int
    #: The last durable seq before the run's first event: stream with after=base_seq.
    base_seq: int
    queued: NotRequired[bool]
    steering_id: NotRequired[str]
    #: The request's "once" key was taken before: this is the first request's run.
    repeated: NotRequired[bool]


class ActiveRun(TypedDict, total=False):
    run_id: str
    number: int
    base_seq: int


class SessionStatus(TypedDict):
    session_id: str
    state: SessionState
    revision: NotRequired[int]
    last_seq: NotRequired[int]
    runs: NotRequired[int]
    active_run: NotRequired[ActiveRun]
    queued: NotRequired[int]
    #: A Usage, typed loosely as the OpenAPI document has it.
    usage: NotRequired[Dict[str, Any]]
    last_outcome: NotRequired[Dict[str, Any]]
    shutdown: NotRequired[bool]
    hand_overs: NotRequired[int]
    closed: NotRequired[Dict[str, Any]]
    #: Where the session was forked from (docs/contract.md §19). To an API
    #: key limited to a prefix that does not cover the source, ``source``
    #: is empty and ``seq`` 0, here and in ``session.forked``.
    parent: NotRequired[Dict[str, Any]]
    #: Set on a child session: who delegated to it (docs/contract.md §21.3).
    delegated: NotRequired[Dict[str, Any]]


class HistoryPage(TypedDict, total=False):
    messages: List[Dict[str, Any]]
    offset: int
    total: int
    revision: int


class Envelope(TypedDict):
    """An event as JSON (docs/contract.md §1.2)."""
    seq: NotRequired[int]
    type: str
    session_id: str
    run_id: NotRequired[str]
    at: str
    after_seq: NotRequired[int]
    #: Deltas relayed from a child session only: its path (docs/contract.md §21.4).
    path: NotRequired[str]
    data: Any


class EventsPage(TypedDict):
    events: List[Envelope]
    more: bool
    next_after: int


class SteerRequest(TypedDict):
    text: str


class SteerResponse(TypedDict):
    steering_id: str
    run_id: str


class RetractResponse(TypedDict):
    result: Literal["retracted", "already_applied", "not_found"]
    run_id: str


class RespondRequest(TypedDict):
    request_id: str
    answer: Any


class StatusResponse(TypedDict):
    status: Literal["delivered", "cancel_requested", "paused", "unpaused", "triggered", "deleted"]
    run_id: NotRequired[str]


class HostRequest(TypedDict, total=False):
    request_id: str
    tool_call_id: str
    prompt: str
    schema: Any
    #: A child session's request (docs/contract.md §21.4): its path;
    #: request_id is PATH:ID.
    path: str
    #: The child session that asked.
    session_id: str


class RequestsResponse(TypedDict):
    requests: List[HostRequest]
    run_id: NotRequired[str]


class ForkRequest(TypedDict):
    """A point: after run ``run`` (0: before the first), or after step ``step`` of it."""
    run: int
    step: NotRequired[int]
    #: The new session's ID; generated when left out.
    into: NotRequired[str]


class ForkOrigin(TypedDict):
    source: str
    run: int
    step: NotRequired[int]
    revision: int
    seq: int


class ForkResponse(TypedDict):
    session_id: str
    parent: ForkOrigin


class RewindRequest(TypedDict):
    run: int
    step: NotRequired[int]


class RewindResponse(TypedDict):
    from_run: int
    from_revision: int
    revision: int
    #: The session.rewound event's seq.
    seq: int
    #: The transcript's length after the rewind.
    messages: int


class ForkSummary(TypedDict):
    session_id: str


class ForksResponse(TypedDict):
    """The forks of a session, sorted by ID; each one's point is its own ``parent``."""
    forks: List[ForkSummary]
    #: More forks exist than the limit (under the key's prefix, for a key limited to one).
    truncated: bool


class SessionSummary(TypedDict):
    id: str
    #: Temporal's status of the session's workflow (running between runs too).
    status: str
    #: keel's state, as the visibility store last saw it.
    state: SessionState
    #: A run is in progress, so it can be cancelled.
    active: bool
    started_at: str


class SessionsResponse(TypedDict):
    sessions: List[SessionSummary]
    namespace: str
    web_ui: NotRequired[str]


class ScheduleConfig(TypedDict, total=False):
    """A schedule's run configuration: for each firing's run only.
    ``agent`` names one of the worker's agents, which defines the model,
    instructions and tools (docs/contract.md §21.2)."""
    agent: str
    model: str
    tools: List[str]
    system: str
    max_steps: int
    approvals: Dict[str, Approval]
    budget: Budget
    session_budget: Budget


class Schedule(TypedDict):
    """A schedule (docs/contract.md §22): ``prompt`` sent at the times of
    ``cron``, every ``every``, or both. Durations are Go duration strings
    ("1h30m")."""
    id: str
    cron: NotRequired[str]
    every: NotRequired[str]
    #: IANA time zone of cron; default UTC.
    timezone: NotRequired[str]
    jitter: NotRequired[str]
    prompt: str
    #: Default: the session named like the schedule.
    session: NotRequired[str]
    #: A new session each firing, named ID-YYYYMMDDTHHMMSSZ.
    new_session: NotRequired[bool]
    config: NotRequired[ScheduleConfig]
    overlap: NotRequired[Literal["skip", "queue", "steer"]]
    pause_on_failure: NotRequired[bool]
    #: Default 10m.
    catchup_window: NotRequired[str]


class ScheduleChange(TypedDict, total=False):
    """PATCH /v1/schedules/{name}: each field given replaces the schedule's."""
    cron: str
    every: str
    timezone: str
    jitter: str
    prompt: str
    session: str
    new_session: bool
    config: ScheduleConfig
    overlap: Literal["skip", "queue", "steer"]
    pause_on_failure: bool
    catchup_window: str


class ScheduleNote(TypedDict, total=False):
    note: str


class KeelError(TypedDict):
    """keel's typed error: code (keel.InvalidInput, keel.ProviderError...) and message."""
    code: str
    message: str
    retryable: NotRequired[bool]
    provider: NotRequired[Dict[str, Any]]


class ScheduledSendResult(TypedDict):
    """What a firing did."""
    session: str
    run_id: NotRequired[str]
    number: NotRequired[int]
    queued: NotRequired[bool]
    steering_id: NotRequired[str]
    #: A run was active and the schedule skips.
    skipped: NotRequired[bool]
    outcome: NotRequired[Dict[str, Any]]
    #: A limit of the worker refused the firing: nothing was sent.
    refused: NotRequired[KeelError]


class ScheduleFiring(TypedDict):
    scheduled_at: str
    started_at: str
    workflow_id: str
    status: Literal["sending", "sent", "skipped", "failed", "refused"]
    result: NotRequired[ScheduledSendResult]
    run: NotRequired[Literal["active", "completed", "failed", "cancelled"]]
    error: NotRequired[KeelError]


class ScheduleStatus(TypedDict):
    schedule: Schedule
    paused: bool
    note: NotRequired[str]
    paused_by_failure: NotRequired[bool]
    failure: NotRequired[KeelError]
    #: The next firing times (none while paused).
    next: List[str]
    #: The latest firings, oldest first.
    recent: List[ScheduleFiring]
    fired: int
    missed: NotRequired[int]
    created: str
    updated: NotRequired[str]


class ScheduleSummary(TypedDict):
    id: str
    paused: bool
    note: NotRequired[str]
    next: NotRequired[str]
    last: NotRequired[str]


class SchedulesResponse(TypedDict):
    schedules: List[ScheduleSummary]
    truncated: bool


TERMINAL_TYPES = frozenset({"run.completed", "run.cancelled", "run.failed"})


@dataclass(frozen=True)
class Event:
    """One event of a stream: durable (``seq`` set) or a delta
    (``after_seq`` set). ``data`` is the event's data as JSON; ``raw`` the
    whole envelope."""

    type: str
    session_id: str
    at: str
    data: Any
    seq: Optional[int] = None
    run_id: Optional[str] = None
    after_seq: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def durable(self) -> bool:
        return self.seq is not None

    @property
    def terminal(self) -> bool:
        """Whether it ends a run (run.completed, run.cancelled, run.failed)."""
        return self.type in TERMINAL_TYPES

    @classmethod
    def from_envelope(cls, env: Dict[str, Any]) -> "Event":
        def num(k: str) -> Optional[int]:
            v = env.get(k)
            return v if isinstance(v, int) and not isinstance(v, bool) else None
        return cls(type=str(env.get("type", "")), session_id=str(env.get("session_id", "")), at=str(env.get("at", "")),
                   data=env.get("data"), seq=num("seq"), run_id=env.get("run_id"), after_seq=num("after_seq"), raw=env)


@dataclass(frozen=True)
class Lag:
    """Deltas were lost to a slow reader; the durable events that follow
    carry what they showed."""

    missed: int
    last_seq: int
    type: str = "lag"
