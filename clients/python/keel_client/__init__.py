"""keel_client: a client of keel's HTTP gateway on the standard library.

    from keel_client import Client

    keel = Client("http://127.0.0.1:7280")
    run = keel.send("demo", "Give me a tour")
    with keel.events("demo", after=run["base_seq"]) as events:
        for e in events:
            if e.type == "text.delta":
                print(e.data["text"], end="", flush=True)
            if e.terminal:
                break

Field names are the wire's (docs/gateway.md); errors are KeelError
subclasses carrying the gateway's code and HTTP status.
"""

from .client import DEFAULT_BASE_URL, Client, EventStream, StreamItem
from .errors import (BadRequest, Conflict, ConnectionFailed, Forbidden, KeelError, NotFound, TooLarge,
                     TooManyRequests, Unauthorized, Unavailable, error_from)
from .sse import Message, parse_sse
from .types import Event, Lag

__all__ = [
    "Client", "EventStream", "StreamItem", "DEFAULT_BASE_URL", "Event", "Lag", "Message", "parse_sse",
    "KeelError", "BadRequest", "Unauthorized", "Forbidden", "NotFound", "Conflict", "TooLarge",
    "TooManyRequests", "Unavailable", "ConnectionFailed", "error_from",
]
