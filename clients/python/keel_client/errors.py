"""Typed errors of keel's gateway.

Every answer that is not a success carries a JSON body ``{code, message,
keel_code?, retryable?}`` (docs/gateway.md). :class:`KeelError` keeps it;
a subclass per HTTP status lets callers catch a family, and ``code`` says
exactly what happened.
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = [
    "KeelError", "BadRequest", "Unauthorized", "Forbidden", "NotFound", "Conflict",
    "TooLarge", "TooManyRequests", "Unavailable", "ConnectionFailed", "error_from",
]


class KeelError(Exception):
    """An error answer of the gateway, or status 0: no answer arrived."""

    def __init__(self, status: int, code: str, message: str, *, keel_code: Optional[str] = None,
                 retryable: Optional[bool] = None, retry_after: Optional[int] = None) -> None:
        super().__init__(message or f"keel gateway: HTTP {status}")
        self.status = status
        self.code = code or "unknown"
        self.message = message
        self.keel_code = keel_code
        self.retryable = retryable if retryable is not None else status in (0, 429, 503)
        #: Seconds to wait, from the Retry-After header.
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, code={self.code!r}, message={self.message!r})"


class BadRequest(KeelError):
    """400: invalid input (invalid_input, invalid_answer, duplicate_request)."""


class Unauthorized(KeelError):
    """401: a missing or wrong API key (unauthorized)."""


class Forbidden(KeelError):
    """403: the key, origin or host may not do this."""


class NotFound(KeelError):
    """404: unknown session, run or host-input request (not_found, unknown_request)."""


class Conflict(KeelError):
    """409: the session refuses the call in its state (run_active, not_accepting, cursor_ahead, ...)."""


class TooLarge(KeelError):
    """413: the body is over the gateway's limit (body_too_large)."""


class TooManyRequests(KeelError):
    """429: the client holds its maximum of streams (too_many_streams); see retry_after."""


class Unavailable(KeelError):
    """503: Temporal, the store or the gateway is unavailable or at a limit; see retry_after."""


class ConnectionFailed(KeelError):
    """No answer: the connection failed or broke (status 0, code "connection")."""


_BY_STATUS = {400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
              413: TooLarge, 429: TooManyRequests, 503: Unavailable}

# A stream_error event has no status: its code names the class.
_BY_CODE = {"invalid_input": BadRequest, "unauthorized": Unauthorized, "forbidden": Forbidden,
            "not_found": NotFound, "not_accepting": Conflict, "cursor_ahead": Conflict,
            "too_many_streams": TooManyRequests, "unavailable": Unavailable, "overloaded": Unavailable}


def error_from(status: int, body: Any, retry_after: Optional[str] = None) -> KeelError:
    """The typed error of an answer's status, JSON body and Retry-After
    header; status 0 is a stream_error event's body."""
    b = body if isinstance(body, dict) else {}

    def text(k: str) -> Optional[str]:
        v = b.get(k)
        return v if isinstance(v, str) else None

    cls = _BY_STATUS.get(status) or (_BY_CODE.get(text("code") or "") if status == 0 else None) or KeelError
    retryable = b.get("retryable")
    seconds = int(retry_after) if retry_after and retry_after.isdigit() else None
    return cls(status, text("code") or "unknown", text("message") or "", keel_code=text("keel_code"),
               retryable=retryable if isinstance(retryable, bool) else None, retry_after=seconds)
