"""A local HTTP server for the unit tests: it records each request and
answers from a queue of replies (or {} when the queue is empty)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple, Union
from urllib.parse import parse_qsl, urlsplit

# A reply: (status, JSON body) or (200, "text/event-stream body").
Reply = Tuple[int, Union[Dict[str, Any], str]]


class FakeGateway:
    def __init__(self) -> None:
        self.calls: List[Dict[str, Any]] = []
        self.replies: List[Reply] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                u = urlsplit(self.path)
                # A JSON body decoded (body); any other as it came (raw).
                is_json = self.headers.get("Content-Type") == "application/json"
                fake.calls.append({"method": self.command, "path": u.path, "query": dict(parse_qsl(u.query)),
                                   "headers": dict(self.headers.items()),
                                   "body": json.loads(raw) if raw and is_json else None,
                                   "raw": raw if raw and not is_json else None})
                status, body = fake.replies.pop(0) if fake.replies else (200, {})
                if isinstance(body, str):
                    data, ctype = body.encode(), "text/event-stream"
                else:
                    data, ctype = json.dumps(body).encode(), "application/json"
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                if status == 503:
                    self.send_header("Retry-After", "0")
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_DELETE = _serve

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def header(call: Dict[str, Any], name: str) -> Optional[str]:
    for k, v in call["headers"].items():
        if k.lower() == name.lower():
            return v
    return None
