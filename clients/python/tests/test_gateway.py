"""The client against a running gateway: server/e2e/clients_test.go starts one
(an embedded Temporal server, a worker with scripted models, the gateway
with an API key) and runs these with KEEL_GATEWAY_URL and the scripts'
model specs in the environment. Without KEEL_GATEWAY_URL they are
skipped."""

from __future__ import annotations

import base64
import os
import time
import unittest
from typing import Callable, List, Union

from keel_client import BadRequest, Client, Conflict, Event, EventStream, KeelError, Lag, NotFound, Unauthorized

URL = os.environ.get("KEEL_GATEWAY_URL")
PREFIX = os.environ.get("KEEL_SESSION_PREFIX") or f"py-{int(time.time())}"
Item = Union[Event, Lag]

#: A 1×1 PNG.
PIXEL = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYPj/HwADAgH/tIZQOQAAAABJRU5ErkJggg==")


def model(name: str) -> str:
    m = os.environ.get(f"KEEL_MODEL_{name}")
    if not m:
        raise AssertionError(f"KEEL_MODEL_{name} is not set")
    return m


def until(stream: EventStream, pred: Callable[[Item], bool]) -> List[Item]:
    """The stream's items up to and including the first for which pred holds."""
    got: List[Item] = []
    for item in stream:
        got.append(item)
        if pred(item):
            return got
    raise AssertionError(f"the stream ended before the awaited event; got {[i.type for i in got]}")


def of_type(t: str) -> Callable[[Item], bool]:
    return lambda e: e.type == t


def durable(items: List[Item]) -> List[Event]:
    return [e for e in items if isinstance(e, Event) and e.durable]


@unittest.skipUnless(URL, "KEEL_GATEWAY_URL is not set (server/e2e/clients_test.go sets it)")
class GatewayTest(unittest.TestCase):
    def setUp(self) -> None:
        self.client = Client(URL or "", api_key=os.environ.get("KEEL_API_KEY") or None)

    def test_send_stream_state_history_and_resume(self) -> None:
        sid = f"{PREFIX}-hello"
        run = self.client.send(sid, "Say hello.", model=model("HELLO"))
        self.assertEqual((run["run_id"], run["number"]), (f"{sid}/run-1", 1))
        with self.client.events(sid, after=run["base_seq"]) as stream:
            items = until(stream, of_type("run.completed"))
        events = durable(items)
        self.assertEqual([e.seq for e in events], list(range(run["base_seq"] + 1, run["base_seq"] + 1 + len(events))))
        self.assertEqual(events[0].type, "run.started")
        self.assertEqual(events[0].data["number"], 1)
        self.assertEqual(events[-1].data["text"], "Hello from keel.")
        for e in items:
            if isinstance(e, Event) and not e.durable:
                self.assertIsNotNone(e.after_seq, e.type)

        state = self.client.state(sid)
        self.assertEqual((state["session_id"], state["state"], state["runs"]), (sid, "completed", 1))
        self.assertEqual(state["last_seq"], events[-1].seq)
        self.assertNotIn("active_run", state)

        history = self.client.history(sid)
        self.assertEqual([f"{m['role']}: {m.get('content')}" for m in history["messages"]],
                         ["user: Say hello.", "assistant: Hello from keel."])
        self.assertEqual(history["total"], 2)

        page = self.client.events_page(sid, after=0, limit=500)
        self.assertEqual([e["seq"] for e in page["events"]], [e.seq for e in events])
        self.assertFalse(page["more"])
        small = self.client.events_page(sid, after=0, limit=2)
        self.assertEqual(([e["seq"] for e in small["events"]], small["more"], small["next_after"]), ([1, 2], True, 2))

        # Resume from an id: exactly the later durable events, in order.
        mid = events[len(events) // 2].seq
        want = [(e.seq, e.type) for e in events if e.seq > mid]
        for kw in ({"last_event_id": mid}, {"last_event_id": str(mid), "after": 0}, {"after": mid}):
            with self.client.events(sid, **kw) as stream:
                later = durable(until(stream, of_type("run.completed")))
            self.assertEqual([(e.seq, e.type) for e in later], want, f"resumed with {kw}")

        with self.assertRaises(Conflict) as cm:
            next(self.client.events(sid, last_event_id=state["last_seq"] + 1000))
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "cursor_ahead"))

    def test_model_is_for_its_run_only_unless_set_default(self) -> None:
        sid = f"{PREFIX}-defaults"
        self.client.send(sid, "one", model=model("DEFAULT"), set_default=True, if_active="queue")
        self.client.send(sid, "two", model=model("OTHER"), if_active="queue")
        self.client.send(sid, "three", if_active="queue")
        with self.client.events(sid, after=0) as stream:
            items = until(stream, lambda e: e.type in ("run.completed", "run.failed", "run.cancelled")
                          and e.data["revision"] == 3)
        models = [e.data["model"] for e in durable(items) if e.type == "run.started"]
        self.assertEqual(models, [model("DEFAULT"), model("OTHER"), model("DEFAULT")])

    def test_steer_retract_and_cancel_a_sleeping_run(self) -> None:
        sid = f"{PREFIX}-sleep"
        run = self.client.send(sid, "Wait an hour.", model=model("SLEEP"), tools=["sleep"])
        with self.client.events(sid, after=run["base_seq"]) as stream:
            until(stream, lambda e: e.type == "tool.started" and e.data["name"] == "sleep")

            with self.assertRaises(Conflict) as cm:
                self.client.send(sid, "again", model=model("SLEEP"))
            self.assertEqual(cm.exception.code, "run_active")
            steer = self.client.steer(sid, "Also check the notes.")
            self.assertEqual(steer["run_id"], run["run_id"])
            accepted = until(stream, of_type("steering.accepted"))[-1]
            self.assertEqual(accepted.data, {"steering_id": steer["steering_id"], "text": "Also check the notes."})

            self.assertEqual(self.client.retract_steering(sid, steer["steering_id"]),
                             {"result": "retracted", "run_id": run["run_id"]})
            self.assertEqual(until(stream, of_type("steering.retracted"))[-1].data["steering_id"], steer["steering_id"])
            self.assertEqual(self.client.retract_steering(sid, "steer-none")["result"], "not_found")
            self.assertEqual(self.client.requests(sid)["requests"], [])

            running = self.client.state(sid)
            self.assertEqual(running["state"], "running")
            self.assertEqual(running["active_run"]["run_id"], run["run_id"])

            self.assertEqual(self.client.cancel(sid)["status"], "cancel_requested")
            tail = until(stream, of_type("run.cancelled"))
        finished = [e for e in tail if e.type == "tool.finished"]
        self.assertEqual([e.data["status"] for e in finished], ["interrupted"])
        after = self.client.state(sid)
        self.assertNotEqual(after["state"], "running")
        self.assertNotIn("active_run", after)
        self.assertEqual(self.client.cancel(sid)["status"], "cancel_requested")
        with self.assertRaises(Conflict) as cm:
            self.client.steer(sid, "late")
        self.assertEqual(cm.exception.code, "not_accepting")

    def test_host_input_is_listed_and_answered(self) -> None:
        sid = f"{PREFIX}-ask"
        run = self.client.send(sid, "Pick a colour.", model=model("ASK"), tools=["ask_user"])
        with self.client.events(sid, after=run["base_seq"]) as stream:
            asked = until(stream, of_type("host_input.requested"))[-1]
            self.assertEqual((asked.data["tool_call_id"], asked.data["prompt"]), ("q1", "Which colour?"))
            self.assertEqual(self.client.state(sid)["state"], "waiting_for_host_input")
            open_ = self.client.requests(sid)
            self.assertEqual(open_["run_id"], run["run_id"])
            self.assertEqual([(r["request_id"], r["tool_call_id"], r["prompt"], r["schema"]) for r in open_["requests"]],
                             [(asked.data["request_id"], "q1", "Which colour?", {"type": "string"})])

            with self.assertRaises(BadRequest) as cm:
                self.client.respond(sid, asked.data["request_id"], 42)
            self.assertEqual((cm.exception.status, cm.exception.code), (400, "invalid_answer"))
            with self.assertRaises(NotFound) as cm:
                self.client.respond(sid, "no-such-request", "blue")
            self.assertEqual(cm.exception.code, "unknown_request")
            self.assertEqual(self.client.respond(sid, asked.data["request_id"], "blue"),
                             {"status": "delivered", "run_id": run["run_id"]})
            rest = until(stream, of_type("run.completed"))
        resolved = [e for e in rest if e.type == "host_input.resolved"]
        self.assertEqual([e.data["request_id"] for e in resolved], [asked.data["request_id"]])
        self.assertEqual([e.data["output"] for e in rest if e.type == "tool.finished"], ["blue"])
        self.assertEqual(rest[-1].data["text"], "Blue it is.")

    def test_attachment_uploaded_and_sent(self) -> None:
        att = self.client.upload_attachment(PIXEL, "image/png", "pixel.png")
        self.assertEqual((att["kind"], att["media_type"], att.get("name"), att["bytes"]), ("image", "image/png", "pixel.png", len(PIXEL)))
        self.assertRegex(att["key"], r"^sha256:[0-9a-f]{64}$")
        self.assertEqual(self.client.upload_attachment(PIXEL, "image/png")["key"], att["key"], "the same bytes, the same key")

        sid = f"{PREFIX}-attach"
        run = self.client.send(sid, "What is this?", model=model("HELLO"), attachments=[att])
        with self.client.events(sid, after=run["base_seq"]) as stream:
            until(stream, of_type("run.completed"))
        self.assertEqual(self.client.history(sid)["messages"][0]["attachments"], [att])

        with self.assertRaises(KeelError) as cm:
            self.client.upload_attachment(b"hello", "text/plain")
        self.assertEqual((cm.exception.status, cm.exception.code), (415, "unsupported_media_type"))
        with self.assertRaises(BadRequest) as bad:
            self.client.upload_attachment(b"hello", "image/png")
        self.assertEqual(bad.exception.code, "invalid_input")

    def test_bad_requests_get_typed_errors(self) -> None:
        with self.assertRaises(NotFound) as cm:
            self.client.state(f"{PREFIX}-nobody")
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))
        with self.assertRaises(BadRequest) as cm:
            self.client.send(f"{PREFIX}-bad", "")
        self.assertEqual(cm.exception.code, "invalid_input")
        with self.assertRaises(BadRequest):
            self.client.send(f"{PREFIX}-bad", "x", if_active="sometimes")
        with self.assertRaises(BadRequest) as cm:
            self.client.send(f"{PREFIX}-bad", "x", model="scripted:/etc/shadow", set_default=True)
        self.assertEqual(cm.exception.code, "invalid_input")
        if os.environ.get("KEEL_API_KEY"):
            with self.assertRaises(Unauthorized) as cm:
                Client(URL or "").state(f"{PREFIX}-hello")
            self.assertEqual(cm.exception.code, "unauthorized")
        listed = self.client.sessions(limit=5)
        self.assertIsInstance(listed["namespace"], str)
        self.assertIsInstance(listed["sessions"], list)

    def test_fork_once_per_id_and_rewind(self) -> None:
        sid = f"{PREFIX}-forksrc"
        self.client.send(sid, "one", model=model("DEFAULT"), if_active="queue")
        self.client.send(sid, "two", model=model("DEFAULT"), if_active="queue")
        with self.client.events(sid, after=0) as stream:
            until(stream, lambda e: e.type in ("run.completed", "run.failed", "run.cancelled")
                  and e.data["revision"] == 2)
        source = self.client.history(sid)
        fork = self.client.fork(sid, 2, into=f"{PREFIX}-fork")
        self.assertEqual(fork["session_id"], f"{PREFIX}-fork")
        self.assertEqual((fork["parent"]["source"], fork["parent"]["run"], fork["parent"]["revision"]), (sid, 2, 2))
        self.assertEqual(self.client.fork(sid, 2, into=f"{PREFIX}-fork"), fork, "the same fork again")
        self.assertEqual(self.client.history(fork["session_id"])["messages"], source["messages"])
        self.assertEqual(self.client.state(fork["session_id"])["parent"], fork["parent"])
        # The source lists its forks once Temporal's visibility has them
        # (asked again until then), at most limit of them.
        self.client.fork(sid, 1, into=f"{PREFIX}-fork1")
        want = [f"{PREFIX}-fork", f"{PREFIX}-fork1"]
        deadline = time.monotonic() + 30
        while True:
            listed = self.client.forks(sid)
            if len(listed["forks"]) == 2 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(listed, {"forks": [{"session_id": i} for i in want], "truncated": False})
        one = self.client.forks(sid, limit=1)
        self.assertEqual(len(one["forks"]), 1)
        self.assertIn(one["forks"][0]["session_id"], want)
        self.assertTrue(one["truncated"])
        self.assertEqual(self.client.forks(fork["session_id"]), {"forks": [], "truncated": False}, "a fork without forks")
        rewound = self.client.rewind(sid, 0)
        self.assertEqual((rewound["from_run"], rewound["revision"], rewound["messages"]), (2, 3, 0))
        self.assertEqual(self.client.history(sid)["total"], 0)
        with self.assertRaises(NotFound):
            self.client.rewind(sid, 2)

    def test_schedule(self) -> None:
        sid = f"{PREFIX}-sched"
        created = self.client.create_schedule({"id": sid, "every": "1h", "prompt": "Report.",
                                               "config": {"model": model("DEFAULT")}})
        self.assertEqual(created["schedule"]["id"], sid)
        self.assertFalse(created["paused"])
        self.assertTrue(created["next"])
        with self.assertRaises(BadRequest):
            self.client.create_schedule({"id": sid, "every": "1h", "prompt": "again"})
        with self.assertRaises(BadRequest):
            self.client.create_schedule({"id": f"{PREFIX}-bad", "every": "1h", "prompt": "x",
                                         "config": {"model": "scripted:/etc/passwd"}})
        self.client.trigger_schedule(sid)
        deadline = time.monotonic() + 30
        while True:
            st = self.client.schedule(sid)
            if (len(st["recent"]) == 1 and st["recent"][0].get("run") == "completed") or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        firing = st["recent"][0]
        self.assertEqual((firing["status"], firing["result"]["session"], firing["result"]["run_id"]),
                         ("sent", sid, f"{sid}/run-1"))
        first = self.client.events_page(sid)["events"][0]
        self.assertEqual((first["type"], first["data"]["prompt"]), ("run.started", "Report."))
        self.assertEqual(self.client.pause_schedule(sid, note="quiet"), {"status": "paused"})
        st = self.client.schedule(sid)
        self.assertEqual((st["paused"], st["note"], st["next"]), (True, "quiet", []))
        changed = self.client.update_schedule(sid, {"prompt": "Weekly report.", "cron": "0 9 * * 1"})
        self.assertEqual((changed["schedule"]["prompt"], changed["schedule"]["cron"]), ("Weekly report.", "0 9 * * 1"))
        self.assertEqual(self.client.unpause_schedule(sid), {"status": "unpaused"})
        deadline = time.monotonic() + 30
        while True:
            listed = self.client.schedules()
            # Visibility is eventually consistent: wait until it has the unpause.
            if any(s["id"] == sid and not s["paused"] for s in listed["schedules"]) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertTrue(any(s["id"] == sid and not s["paused"] for s in listed["schedules"]))
        self.assertEqual(self.client.delete_schedule(sid), {"status": "deleted"})
        with self.assertRaises(NotFound):
            self.client.schedule(sid)
        self.assertEqual(self.client.state(sid)["runs"], 1, "the session stays")


if __name__ == "__main__":
    unittest.main()
