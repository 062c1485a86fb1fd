"""The client's calls and types against routes.json: every operation the
table lists is one the client makes, with exactly its query parameters,
headers and body fields, and every TypedDict named after a schema has
exactly the table's fields. server/e2e/clients_test.go checks the table against
the gateway's OpenAPI document."""

from __future__ import annotations

import base64
import json
import re
import typing
import unittest
from pathlib import Path

from keel_client import Client, KeelError, types
from tests.fake import FakeGateway, header

TABLE = json.loads((Path(__file__).resolve().parent.parent / "keel_client" / "routes.json").read_text())

#: A 1×1 PNG.
PIXEL = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYPj/HwADAgH/tIZQOQAAAABJRU5ErkJggg==")


def operation_of(method: str, path: str):
    for name, op in TABLE["operations"].items():
        pattern = "^" + re.sub(r"\{[a-z_]+\}", "[^/]+", op["path"]) + "$"
        if op["method"] == method and re.match(pattern, path):
            return name
    return None


def fields_of(td: type, schemas: typing.Collection[str], prefix: str = "") -> typing.List[str]:
    """A TypedDict's keys, with nested TypedDicts (not themselves schemas)
    as dotted names, as routes.json lists them."""
    out = []
    hints = typing.get_type_hints(td)
    for key, hint in hints.items():
        out.append(prefix + key)
        inner = hint
        if typing.get_origin(inner) in (list, typing.List):
            inner = typing.get_args(inner)[0]
        if typing.is_typeddict(inner) and inner.__name__ not in schemas:
            out.extend(fields_of(inner, schemas, prefix + key + "."))
    return out


class RoutesTest(unittest.TestCase):
    def setUp(self) -> None:
        self.gw = FakeGateway()
        self.addCleanup(self.gw.close)

    def call_everything(self, c: Client) -> None:
        c.sessions(limit=5)
        att = c.upload_attachment(PIXEL, "image/png", "pixel.png")
        c.send("s1", "p", model="m", tools=[], system="s", max_steps=3, max_tokens=500, approvals={"*": "ask"}, if_active="queue",
               set_default=True, budget={"max": 0.5, "currency": "USD"}, session_budget={"max_tokens": 1000},
               output_schema={"type": "object"}, agent="a", once="k", reasoning={"effort": "low"}, hooks=["guard"],
               attachments=[att])
        c.state("s1")
        c.history("s1", offset=1, limit=2)
        c.events_page("s1", after=3, limit=4)
        # One stream resumed (Last-Event-ID), one started with after; an
        # empty answer ends them, and without reconnecting they raise.
        for kw in ({"last_event_id": 7}, {"after": 3}):
            self.gw.replies.append((200, ": nothing\n\n"))
            with self.assertRaises(KeelError):
                list(c.events("s1", reconnect=False, **kw))
        c.steer("s1", "t", run=2, attachments=[att])
        c.retract_steering("s1", "steer-1", run=2)
        c.respond("s1", "r1", {"any": "json"}, run=2)
        c.cancel("s1", run=2)
        c.requests("s1", run=2)
        c.fork("s1", 2, step=1, into="s2")
        c.rewind("s1", 1, step=1)
        c.forks("s1", limit=3)
        config = {"model": "m", "tools": [], "system": "s", "max_steps": 3, "max_tokens": 500, "approvals": {"*": "ask"},
                  "reasoning": {"effort": "low"}, "budget": {"max": 0.5, "currency": "USD"}, "session_budget": {"max_tokens": 1000},
                  "hooks": ["guard"], "output_schema": {"type": "object"}}
        c.schedules(limit=5)
        c.create_schedule({"id": "d1", "cron": "0 9 * * 1-5", "every": "1h", "timezone": "Europe/Berlin", "jitter": "30s",
                           "prompt": "p", "session": "s1", "new_session": False, "config": config, "overlap": "queue",
                           "pause_on_failure": True, "catchup_window": "15m"})
        c.schedule("d1")
        c.update_schedule("d1", {"cron": "@daily", "every": "2h", "timezone": "UTC", "jitter": "1m", "prompt": "q",
                                 "session": "s2", "new_session": False, "config": config, "overlap": "skip",
                                 "pause_on_failure": False, "catchup_window": "1h"})
        c.pause_schedule("d1", note="n")
        c.unpause_schedule("d1", note="n")
        c.trigger_schedule("d1")
        c.delete_schedule("d1")
        c.start_eval({"id": "e1", "cases": [{"id": "a", "prompt": "p"}], "sessions": ["s1"], "session_prefix": "s",
                      "candidate": config, "baseline": config, "judge": {"model": "m"}, "concurrency": 2,
                      "budget": {"max": 1, "currency": "USD"}})
        c.eval("e1")
        c.eval_report("e1")
        c.cancel_eval("e1")

    def test_calls_match_the_table(self) -> None:
        self.call_everything(Client(self.gw.url, api_key="k"))
        seen = {}
        for call in self.gw.calls:
            name = operation_of(call["method"], call["path"])
            self.assertIsNotNone(name, f"{call['method']} {call['path']} is in no operation of routes.json")
            op = TABLE["operations"][name]
            got = seen.setdefault(name, {"query": set(), "headers": set(), "body": set()})
            got["query"].update(call["query"])
            if header(call, "Last-Event-ID") is not None:
                got["headers"].add("Last-Event-ID")
            got["body"].update(call["body"] or {})
            self.assertEqual(header(call, "Authorization"), "Bearer k", name)
            if call["body"] is not None:
                self.assertEqual(header(call, "Content-Type"), "application/json")
            if "body" not in op:
                self.assertIsNone(call["body"], f"{name} sent a body")
            # An upload sends the file as its media type; no other call
            # sends a body that is not JSON.
            if name == "uploadAttachment":
                self.assertEqual(header(call, "Content-Type"), "image/png")
                self.assertEqual(call["raw"], PIXEL)
            else:
                self.assertIsNone(call["raw"], f"{name} sent a body that is not JSON")
        self.assertEqual(sorted(seen), sorted(TABLE["operations"]))
        for name, op in TABLE["operations"].items():
            got = seen[name]
            self.assertEqual(sorted(got["query"]), sorted(op.get("query", [])), f"{name}: query")
            self.assertEqual(sorted(got["headers"]), sorted(op.get("headers", [])), f"{name}: headers")
            want = [f for f in TABLE["schemas"][op["body"]] if "." not in f] if "body" in op else []
            self.assertEqual(sorted(got["body"]), sorted(want), f"{name}: body fields")

    def test_matcher_tells_routes_apart(self) -> None:
        self.assertEqual(operation_of("GET", "/v1/sessions/s1"), "getSession")
        self.assertIsNone(operation_of("POST", "/v1/sessions/s1/unknown"))
        self.assertIsNone(operation_of("GET", "/v1/sessions/s1/cancel"))

    def test_types_match_the_table(self) -> None:
        schemas = TABLE["schemas"]
        for name, want in schemas.items():
            td = getattr(types, name, None)
            self.assertTrue(td is not None and typing.is_typeddict(td), f"keel_client.types has no TypedDict {name}")
            self.assertEqual(sorted(fields_of(td, schemas)), sorted(want), f"fields of {name}")

    def test_type_check_sees_a_missing_field(self) -> None:
        class Short(typing.TypedDict):
            run_id: str
        self.assertNotEqual(sorted(fields_of(Short, TABLE["schemas"])), sorted(TABLE["schemas"]["SteerResponse"]))

    def test_upload_sends_the_bytes_as_their_type(self) -> None:
        self.gw.replies.append((201, {"kind": "image", "media_type": "image/png", "key": "sha256:" + "ab" * 32,
                                      "size": 80, "bytes": len(PIXEL), "name": "a b.png"}))
        att = Client(self.gw.url).upload_attachment(PIXEL, "image/png", "a b.png")
        self.assertEqual(att["key"], "sha256:" + "ab" * 32)
        call = self.gw.calls[0]
        self.assertEqual((call["method"], call["path"], call["query"]), ("POST", "/v1/attachments", {"name": "a b.png"}))
        self.assertEqual(header(call, "Content-Type"), "image/png")
        self.assertEqual(call["raw"], PIXEL)
        Client(self.gw.url).upload_attachment(bytearray(PIXEL), "application/pdf")
        self.assertEqual(self.gw.calls[1]["query"], {}, "no name, no query")
        self.assertEqual(header(self.gw.calls[1], "Content-Type"), "application/pdf")

    def test_ids_are_one_path_segment(self) -> None:
        Client(self.gw.url + "/v1/").retract_steering("s 1", "a/b")
        self.assertEqual(self.gw.calls[0]["path"], "/v1/sessions/s%201/steer/a%2Fb")
        with self.assertRaises(ValueError):
            Client(self.gw.url).state("")


if __name__ == "__main__":
    unittest.main()
