"""A Server-Sent Events parser (the WHATWG rules keel's gateway writes
to: fields id, event, data, retry; comments; LF, CRLF or CR line ends)."""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, List, Optional


@dataclass(frozen=True)
class Message:
    """A dispatched message; ``id`` is None when it carried no id field."""

    event: str
    data: str
    id: Optional[str] = None


def parse_sse(chunks: Iterable[bytes], on_retry: Optional[Callable[[int], None]] = None) -> Iterator[Message]:
    """Yields the messages of a byte stream given in chunks of any size."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    buf = ""
    saw_cr = False
    ev_id: Optional[str] = None
    event = ""
    data: List[str] = []
    for chunk in chunks:
        buf += decoder.decode(chunk)
        start = 0
        for i, c in enumerate(buf):
            if c not in "\r\n":
                continue
            # LF right after CR is the same line end, also across chunks.
            if c == "\n" and saw_cr and i == start:
                saw_cr = False
                start = i + 1
                continue
            saw_cr = c == "\r"
            line = buf[start:i]
            start = i + 1
            if line == "":
                if data:
                    yield Message(event=event or "message", data="\n".join(data), id=ev_id)
                ev_id, event, data = None, "", []
                continue
            if line.startswith(":"):
                continue
            name, colon, value = line.partition(":")
            if colon and value.startswith(" "):
                value = value[1:]
            if name == "id":
                if "\0" not in value:
                    ev_id = value
            elif name == "event":
                event = value
            elif name == "data":
                data.append(value)
            elif name == "retry" and value.isdigit() and on_retry:
                on_retry(int(value))
        buf = buf[start:]
        if saw_cr and buf:
            saw_cr = False
