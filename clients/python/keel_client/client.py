"""The client of keel's HTTP gateway, on urllib alone."""

from __future__ import annotations

import json
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterator, List, Mapping, Optional, Union

from .errors import ConnectionFailed, KeelError, error_from
from .sse import parse_sse
from .types import (Attachment, Budget, EvalInput, EvalReport, EvalStarted, EvalStatus, Event, EventsPage, ForkResponse, ForksResponse, HistoryPage, Lag, Reasoning,
                    RequestsResponse, RetractResponse, RewindResponse, RunResponse, Schedule, ScheduleChange,
                    SchedulesResponse, ScheduleStatus, SessionsResponse, SessionStatus, StatusResponse, SteerResponse)

#: The gateway's address under ``keel dev``.
DEFAULT_BASE_URL = "http://127.0.0.1:7280"

# Codes of stream_error events after which reconnecting can help.
_RETRYABLE_STREAM_CODES = frozenset({"unavailable", "overloaded"})

StreamItem = Union[Event, Lag]


class Client:
    """A client of one keel gateway.

    ``timeout`` bounds each call (seconds); ``stream_timeout`` is the
    longest an event stream may stay silent before it reconnects (the
    gateway writes a keep-alive every 15 s)."""

    def __init__(self, base_url: str = DEFAULT_BASE_URL, *, api_key: Optional[str] = None,
                 timeout: float = 30.0, stream_timeout: float = 60.0,
                 headers: Optional[Mapping[str, str]] = None) -> None:
        base = base_url.rstrip("/")
        if base.endswith("/v1"):
            base = base[:-3]
        self.base_url = base
        self.api_key = api_key
        self.timeout = timeout
        self.stream_timeout = stream_timeout
        self.headers = dict(headers or {})

    # The routes (docs/gateway.md); routes.json lists them for the checks.

    def sessions(self, *, limit: Optional[int] = None) -> SessionsResponse:
        """The newest sessions, running ones first (GET /v1/sessions)."""
        return self._json("GET", "/v1/sessions", query={"limit": limit})

    def send(self, session_id: str, prompt: str, *, model: Optional[str] = None, tools: Optional[List[str]] = None,
             system: Optional[str] = None, max_steps: Optional[int] = None, max_tokens: Optional[int] = None,
             approvals: Optional[Dict[str, str]] = None, if_active: Optional[str] = None,
             set_default: bool = False, budget: Optional[Budget] = None,
             session_budget: Optional[Budget] = None,
             output_schema: Optional[Dict[str, Any]] = None, agent: Optional[str] = None,
             once: Optional[str] = None, reasoning: Optional[Reasoning] = None,
             hooks: Optional[List[str]] = None,
             attachments: Optional[List[Attachment]] = None) -> RunResponse:
        """Sends a prompt; the first creates the session (POST /v1/sessions/{id}/runs).
        Options left None take the session's defaults; those given apply to
        this run only, unless set_default makes them the session's defaults.
        With once, a key of the caller's, a send repeated with the same key
        starts nothing and answers the first send's run ("repeated").
        attachments are references from upload_attachment, at most 8. hooks
        names hooks the worker offers, run at the run's execution boundaries
        (docs/contract.md §23), at most 8."""
        body = {"prompt": prompt, "attachments": attachments, "model": model, "tools": tools, "system": system,
                "max_steps": max_steps, "max_tokens": max_tokens, "approvals": approvals, "reasoning": reasoning,
                "if_active": if_active, "set_default": set_default or None, "budget": budget,
                "session_budget": session_budget, "output_schema": output_schema, "agent": agent, "hooks": hooks,
                "once": once}
        return self._json("POST", _session(session_id) + "/runs", body={k: v for k, v in body.items() if v is not None})

    def state(self, session_id: str) -> SessionStatus:
        """The session's state (GET /v1/sessions/{id})."""
        return self._json("GET", _session(session_id))

    def history(self, session_id: str, *, offset: Optional[int] = None, limit: Optional[int] = None) -> HistoryPage:
        """A page of the committed transcript (GET /v1/sessions/{id}/history)."""
        return self._json("GET", _session(session_id) + "/history", query={"offset": offset, "limit": limit})

    def events_page(self, session_id: str, *, after: Optional[int] = None, limit: Optional[int] = None) -> EventsPage:
        """A JSON page of durable events after a sequence (GET /v1/sessions/{id}/events)."""
        return self._json("GET", _session(session_id) + "/events", query={"after": after, "limit": limit})

    def events(self, session_id: str, *, after: Optional[int] = None, last_event_id: Union[int, str, None] = None,
               reconnect: bool = True, max_reconnects: int = 10,
               reconnect_delay: Optional[float] = None) -> "EventStream":
        """Follows the session's events (Server-Sent Events): an iterator of
        :class:`Event` (durable ones after the cursor, each once and in
        order, deltas between them) and :class:`Lag` notices. It follows the
        session until closed; a broken connection or a retryable
        stream_error reconnects with Last-Event-ID, so no durable event is
        skipped or repeated."""
        return EventStream(self, session_id, after=after, last_event_id=last_event_id, reconnect=reconnect,
                           max_reconnects=max_reconnects, reconnect_delay=reconnect_delay)

    def steer(self, session_id: str, text: str, *, run: Optional[int] = None,
              attachments: Optional[List[Attachment]] = None) -> SteerResponse:
        """Steers the active run (POST /v1/sessions/{id}/steer); returns once
        accepted. attachments are references from upload_attachment."""
        body: Dict[str, Any] = {"text": text}
        if attachments is not None:
            body["attachments"] = attachments
        return self._json("POST", _session(session_id) + "/steer", query={"run": run}, body=body)

    def upload_attachment(self, data: bytes, media_type: str, name: Optional[str] = None) -> Attachment:
        """Stores an image or a PDF for a prompt or steering to carry (POST
        /v1/attachments) and returns its reference: pass it in
        ``attachments`` of :meth:`send` or :meth:`steer`. ``media_type`` is
        image/png, image/jpeg, image/gif, image/webp or application/pdf, and
        the gateway checks the bytes against it (415 for another type, 400
        for content that is not of it, 413 past 5 MiB for an image or 10
        MiB for a PDF); ``name`` is for display. An upload belongs to no
        session."""
        return self._json("POST", "/v1/attachments", query={"name": name}, data=bytes(data), content_type=media_type)

    def retract_steering(self, session_id: str, steering_id: str, *, run: Optional[int] = None) -> RetractResponse:
        """Withdraws staged steering (DELETE /v1/sessions/{id}/steer/{steering_id})."""
        return self._json("DELETE", _session(session_id) + "/steer/" + _segment(steering_id), query={"run": run})

    def respond(self, session_id: str, request_id: str, answer: Any, *, run: Optional[int] = None) -> StatusResponse:
        """Answers a host-input request (POST /v1/sessions/{id}/respond); answer is any JSON value."""
        return self._json("POST", _session(session_id) + "/respond", query={"run": run},
                          body={"request_id": request_id, "answer": answer})

    def cancel(self, session_id: str, *, run: Optional[int] = None) -> StatusResponse:
        """Cancels the active run, cooperatively and idempotently (POST /v1/sessions/{id}/cancel)."""
        return self._json("POST", _session(session_id) + "/cancel", query={"run": run})

    def requests(self, session_id: str, *, run: Optional[int] = None) -> RequestsResponse:
        """The open host-input requests of the active run (GET /v1/sessions/{id}/requests)."""
        return self._json("GET", _session(session_id) + "/requests", query={"run": run})

    def fork(self, session_id: str, run: int, *, step: Optional[int] = None,
             into: Optional[str] = None) -> ForkResponse:
        """Forks the session after run ``run`` (or after step ``step`` of it)
        into a new session (POST /v1/sessions/{id}/fork); ``into`` names it,
        else it is generated. The same ``into`` at the same point answers
        the fork made before."""
        body = {"run": run, "step": step, "into": into}
        return self._json("POST", _session(session_id) + "/fork", body={k: v for k, v in body.items() if v is not None})

    def rewind(self, session_id: str, run: int, *, step: Optional[int] = None) -> RewindResponse:
        """Makes the session go on from after run ``run`` (or after step
        ``step`` of it) (POST /v1/sessions/{id}/rewind)."""
        body = {"run": run, "step": step}
        return self._json("POST", _session(session_id) + "/rewind", body={k: v for k, v in body.items() if v is not None})

    def forks(self, session_id: str, *, limit: Optional[int] = None) -> ForksResponse:
        """The sessions forked from this one (GET /v1/sessions/{id}/forks),
        as Temporal's visibility has them (a fork made a moment ago may be
        missing): at most ``limit`` (default 100, at most 200), sorted by
        ID, with ``truncated`` when there are more. A key limited to a
        prefix sees only the forks under it."""
        return self._json("GET", _session(session_id) + "/forks", query={"limit": limit})

    def schedules(self, *, limit: Optional[int] = None) -> SchedulesResponse:
        """keel's schedules (GET /v1/schedules), sorted by ID, as Temporal's
        visibility has them (one made a moment ago may be missing): at most
        ``limit`` (default 50, at most 200), with ``truncated`` when more
        matched."""
        return self._json("GET", "/v1/schedules", query={"limit": limit})

    def create_schedule(self, schedule: Schedule) -> ScheduleStatus:
        """Creates a schedule (POST /v1/schedules): ``prompt`` sent to a
        session at the times of ``cron``, every ``every``, or both
        (docs/contract.md §22). A keel worker checks it first; returns its
        description."""
        return self._json("POST", "/v1/schedules", body=dict(schedule))

    def schedule(self, name: str) -> ScheduleStatus:
        """A schedule's description: next firings, latest firings and their
        runs (GET /v1/schedules/{name})."""
        return self._json("GET", _schedule(name))

    def update_schedule(self, name: str, change: ScheduleChange) -> ScheduleStatus:
        """Changes a schedule: each field given replaces the schedule's
        (PATCH /v1/schedules/{name})."""
        return self._json("PATCH", _schedule(name), body=dict(change))

    def delete_schedule(self, name: str) -> StatusResponse:
        """Deletes a schedule; the sessions it made stay (DELETE /v1/schedules/{name})."""
        return self._json("DELETE", _schedule(name))

    def pause_schedule(self, name: str, *, note: Optional[str] = None) -> StatusResponse:
        """Pauses a schedule until unpause (POST /v1/schedules/{name}/pause)."""
        return self._json("POST", _schedule(name) + "/pause", body=None if note is None else {"note": note})

    def unpause_schedule(self, name: str, *, note: Optional[str] = None) -> StatusResponse:
        """Makes a paused schedule fire again (POST /v1/schedules/{name}/unpause)."""
        return self._json("POST", _schedule(name) + "/unpause", body=None if note is None else {"note": note})

    def trigger_schedule(self, name: str) -> StatusResponse:
        """Fires a schedule now (POST /v1/schedules/{name}/trigger); the
        firing shows in ``schedule(name)["recent"]``."""
        return self._json("POST", _schedule(name) + "/trigger")

    # Evals (docs/evals.md).

    def start_eval(self, eval_input: EvalInput) -> EvalStarted:
        """Starts an eval (POST /v1/evals): ``cases`` and recorded
        ``sessions`` run under ``candidate`` and ``baseline`` and are
        scored. Returns ``{"id"}``; the same ID while it runs answers that
        eval."""
        return self._json("POST", "/v1/evals", body=dict(eval_input))

    def eval(self, eval_id: str) -> EvalStatus:
        """An eval's progress (GET /v1/evals/{eval}): state, cases done,
        running, passed, failed, usage."""
        return self._json("GET", _eval(eval_id))

    def eval_report(self, eval_id: str) -> EvalReport:
        """An eval's report once it ended (GET /v1/evals/{eval}/report); a
        KeelError with status 409 while it runs."""
        return self._json("GET", _eval(eval_id) + "/report")

    def cancel_eval(self, eval_id: str) -> StatusResponse:
        """Cancels an eval (POST /v1/evals/{eval}/cancel): no case starts,
        running cases' runs are cancelled."""
        return self._json("POST", _eval(eval_id) + "/cancel")

    # Transport.

    def open(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None, body: Any = None,
             headers: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None,
             data: Optional[bytes] = None, content_type: Optional[str] = None):
        """Sends one call and returns the open answer of a success (an
        http.client.HTTPResponse); an error answer raises its KeelError.
        ``body`` is sent as JSON; ``data`` as it is, as ``content_type``."""
        q = {k: str(v) for k, v in (query or {}).items() if v is not None}
        url = self.base_url + path + ("?" + urllib.parse.urlencode(q) if q else "")
        h = {"Accept": "application/json", **self.headers, **(headers or {})}
        if self.api_key:
            h["Authorization"] = "Bearer " + self.api_key
        if body is not None:
            h["Content-Type"] = "application/json"
            data = json.dumps(body).encode()
        elif data is not None:
            h["Content-Type"] = content_type or "application/octet-stream"
        req = urllib.request.Request(url, data=data, headers=h, method=method)
        try:
            return urllib.request.urlopen(req, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as e:
            with e:
                raw = e.read()
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = {}
            raise error_from(e.code, parsed, e.headers.get("Retry-After")) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ConnectionFailed(0, "connection", f"keel gateway {self.base_url}: {reason}") from e

    def _json(self, method: str, path: str, **kw: Any) -> Any:
        with self.open(method, path, **kw) as res:
            return json.load(res)


class EventStream:
    """An open event stream: iterate it for :class:`Event` and :class:`Lag`
    items. ``last_event_id`` is the seq of the last durable event it
    yielded; ``close()`` (from any thread) or leaving a ``with`` block ends
    it."""

    def __init__(self, client: Client, session_id: str, *, after: Optional[int], last_event_id: Union[int, str, None],
                 reconnect: bool, max_reconnects: int, reconnect_delay: Optional[float]) -> None:
        self._client = client
        self._session = session_id
        self._after = after
        self.last_event_id: Optional[str] = None if last_event_id is None else str(last_event_id)
        self._reconnect = reconnect
        self._max = max_reconnects
        self._delay = reconnect_delay
        self._retry = 1.0
        self._closed = threading.Event()
        self._res = None
        self._lock = threading.Lock()
        #: How many times the stream reconnected.
        self.reconnects = 0
        self._opened = False  # whether a stream ever opened
        self._gen = self._run()

    def __iter__(self) -> Iterator[StreamItem]:
        return self

    def __next__(self) -> StreamItem:
        return next(self._gen)

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Ends the stream; an iteration in progress stops."""
        self._closed.set()
        with self._lock:
            res = self._res
        if res is not None:
            try:
                # Shut the socket, which a read blocked in another thread
                # notices at once; closing the response alone may not.
                sock = getattr(getattr(res, "fp", None), "raw", None)
                sock = getattr(sock, "_sock", None)
                if sock is not None:
                    sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                res.close()
            except Exception:
                pass
        try:
            self._gen.close()
        except ValueError:
            pass  # the generator is running in another thread; it sees _closed

    def _run(self) -> Iterator[StreamItem]:
        failures = 0
        while not self._closed.is_set():
            try:
                for item in self._connect():
                    failures = 0
                    yield item
                err: KeelError = ConnectionFailed(0, "connection", "keel gateway: the event stream ended")
            except KeelError as e:
                err = e
            if self._closed.is_set():
                return
            # What goes wrong before the first stream opened (a 404, a
            # refused connection) is the caller's; a stream that broke
            # later, or a retryable stream_error, is ours to mend.
            failures += 1
            if not self._reconnect or not self._opened or not err.retryable or failures > self._max:
                raise err
            self.reconnects += 1
            if self._delay is not None:
                wait = self._delay
            elif err.retry_after is not None:
                wait = float(err.retry_after)
            else:
                wait = self._retry
            if self._closed.wait(wait):
                return

    def _connect(self) -> Iterator[StreamItem]:
        headers = {"Accept": "text/event-stream"}
        query: Dict[str, Any] = {}
        if self.last_event_id is not None:
            headers["Last-Event-ID"] = self.last_event_id
        elif self._after is not None:
            query["after"] = self._after
        res = self._client.open("GET", _session(self._session) + "/events", query=query, headers=headers,
                                timeout=self._client.stream_timeout)
        self._opened = True
        with self._lock:
            self._res = res
        try:
            for msg in parse_sse(_chunks(res), self._set_retry):
                item = _decode(msg.event, msg.data)
                if item is None:
                    continue
                if isinstance(item, KeelError):
                    raise item
                if msg.id is not None:
                    self.last_event_id = msg.id
                yield item
        except (OSError, ValueError) as e:
            # A read that timed out, a reset, or a socket shut by close().
            raise ConnectionFailed(0, "connection", f"keel gateway: the event stream broke: {e}") from e
        finally:
            with self._lock:
                self._res = None
            res.close()

    def _set_retry(self, ms: int) -> None:
        self._retry = ms / 1000.0


def _chunks(res: Any) -> Iterator[bytes]:
    while True:
        b = res.read1(65536)
        if not b:
            return
        yield b


def _decode(event: str, data: str) -> Union[Event, Lag, KeelError, None]:
    try:
        body = json.loads(data)
    except ValueError:
        return None
    if event == "stream_error":
        err = error_from(0, body)
        err.retryable = err.code in _RETRYABLE_STREAM_CODES or (isinstance(body, dict) and body.get("retryable") is True)
        return err
    if not isinstance(body, dict):
        return None
    if event == "lag":
        return Lag(missed=int(body.get("missed", 0)), last_seq=int(body.get("last_seq", 0)))
    if not isinstance(body.get("type"), str):
        return None
    return Event.from_envelope(body)


def _session(session_id: str) -> str:
    return "/v1/sessions/" + _segment(session_id)


def _schedule(name: str) -> str:
    return "/v1/schedules/" + _segment(name)


def _eval(eval_id: str) -> str:
    return "/v1/evals/" + _segment(eval_id)


def _segment(s: str) -> str:
    if not isinstance(s, str) or s == "":
        raise ValueError("keel: a session or steering ID must be a non-empty string")
    return urllib.parse.quote(s, safe="")


__all__ = ["Client", "EventStream", "DEFAULT_BASE_URL", "StreamItem"]
