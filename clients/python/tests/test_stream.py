"""The SSE parser, reconnection with Last-Event-ID, and typed errors."""

from __future__ import annotations

import json
import unittest

from keel_client import (BadRequest, Client, Conflict, ConnectionFailed, Event, KeelError, Lag, Message, NotFound,
                         Unavailable, parse_sse)
from tests.fake import FakeGateway, header


def env(seq: int, typ: str) -> str:
    return json.dumps({"seq": seq, "type": typ, "session_id": "s", "run_id": "s/run-1", "at": "2026-01-01T00:00:00Z", "data": {}})


class ParseTest(unittest.TestCase):
    TEXT = ("retry: 1000\n\n: comment\nid: 1\nevent: run.started\ndata: {\"a\":1}\n\r\n"
            "event: text.delta\r\ndata: x\rdata: y\r\rid: 2\ndata:z\n\n")
    WANT = [Message(id="1", event="run.started", data="{\"a\":1}"), Message(event="text.delta", data="x\ny"),
            Message(id="2", event="message", data="z")]

    def test_fields_comments_and_line_ends(self) -> None:
        retry = []
        self.assertEqual(list(parse_sse([self.TEXT.encode()], retry.append)), self.WANT)
        self.assertEqual(retry, [1000])

    def test_split_anywhere(self) -> None:
        b = self.TEXT.encode()
        self.assertEqual(list(parse_sse([b[i:i + 1] for i in range(len(b))])), self.WANT)
        # A UTF-8 character split across chunks stays whole.
        snow = "data: ☃\n\n".encode()
        self.assertEqual(list(parse_sse([snow[:7], snow[7:]])), [Message(event="message", data="☃")])

    def test_unfinished_message_is_not_dispatched(self) -> None:
        self.assertEqual(list(parse_sse([b"id: 9\ndata: cut"])), [])


class StreamTest(unittest.TestCase):
    def setUp(self) -> None:
        self.gw = FakeGateway()
        self.addCleanup(self.gw.close)
        self.client = Client(self.gw.url)

    def test_reconnects_with_last_event_id(self) -> None:
        self.gw.replies += [
            (200, f"id: 1\nevent: run.started\ndata: {env(1, 'run.started')}\n\n"
                  "event: text.delta\ndata: {\"type\":\"text.delta\",\"session_id\":\"s\",\"after_seq\":1,\"at\":\"x\",\"data\":{\"text\":\"hi\"}}\n\n"
                  f"id: 2\nevent: step.started\ndata: {env(2, 'step.started')}\n\n"),
            (200, "event: stream_error\ndata: {\"code\":\"unavailable\",\"message\":\"Temporal is down\"}\n\n"),
            (200, f"event: lag\ndata: {{\"missed\":3,\"last_seq\":2}}\n\nid: 3\nevent: run.completed\ndata: {env(3, 'run.completed')}\n\n"),
        ]
        got = []
        with self.client.events("s", after=0, reconnect_delay=0) as stream:
            for item in stream:
                got.append(item)
                if isinstance(item, Event) and item.terminal:
                    break
            self.assertEqual(stream.reconnects, 2)
            self.assertEqual(stream.last_event_id, "3")
        self.assertEqual([i.seq if isinstance(i, Event) and i.durable else i.type for i in got], [1, "text.delta", 2, "lag", 3])
        self.assertEqual(got[1].after_seq, 1)
        self.assertEqual(got[3], Lag(missed=3, last_seq=2))
        cursors = [(header(c, "Last-Event-ID"), c["query"].get("after")) for c in self.gw.calls]
        self.assertEqual(cursors, [(None, "0"), ("2", None), ("2", None)])

    def test_refused_stream_raises_at_once(self) -> None:
        self.gw.replies.append((409, {"code": "cursor_ahead", "message": "ahead"}))
        with self.assertRaises(Conflict) as cm:
            next(self.client.events("s", last_event_id=99))
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "cursor_ahead"))
        with self.assertRaises(ConnectionFailed):
            next(Client("http://127.0.0.1:1").events("s"))

    def test_unmendable_stream_error(self) -> None:
        self.gw.replies.append((200, "event: stream_error\ndata: {\"code\":\"not_accepting\",\"message\":\"terminated\"}\n\n"))
        with self.assertRaises(Conflict) as cm:
            list(self.client.events("s", reconnect_delay=0))
        self.assertEqual(cm.exception.code, "not_accepting")

    def test_gives_up_after_max_reconnects(self) -> None:
        self.gw.replies += [(200, ": hello\n\n"), (503, {"code": "overloaded", "message": "busy"}),
                            (503, {"code": "overloaded", "message": "busy"})]
        with self.assertRaises(Unavailable):
            list(self.client.events("s", reconnect_delay=0, max_reconnects=2))
        self.assertEqual(len(self.gw.calls), 3)

    def test_typed_errors(self) -> None:
        self.gw.replies.append((503, {"code": "overloaded", "message": "busy", "retryable": True}))
        with self.assertRaises(Unavailable) as cm:
            self.client.state("s")
        e = cm.exception
        self.assertIsInstance(e, KeelError)
        self.assertEqual((e.status, e.code, e.message, e.retryable, e.retry_after), (503, "overloaded", "busy", True, 0))
        self.gw.replies.append((404, "<html>"))
        with self.assertRaises(NotFound) as cm:
            self.client.state("s")
        self.assertEqual(cm.exception.code, "unknown")
        self.gw.replies.append((400, {"code": "invalid_input", "message": "m"}))
        with self.assertRaises(BadRequest) as cm:
            self.client.send("s", "")
        self.assertFalse(cm.exception.retryable)


if __name__ == "__main__":
    unittest.main()
