"""The tests' S3 endpoint: moto's server in a process of its own, behind a fault-injecting middleware.

    python -m tests.s3_server      # prints "<host>:<port>", serves until its standard input closes

A process of its own, not a thread of the test process: deltalake's query engine (SQL, load_cdf) holds
the GIL while it fetches from S3, so an in-process server could not answer it; and the server's work no
longer competes with the tests' for the GIL. The tests steer the middleware over HTTP (``RemoteFaults``).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import urllib.request

CONTROL = "/__lakelog_faults__"
STALL_LIMIT_S = 120.0
KINDS = ("conflict409", "lose_reply", "stall", "stall_reply")


class S3TestMiddleware:
    """WSGI middleware in front of moto's S3 app.

    * Serializes conditional writes (requests carrying If-None-Match). moto 5.x checks "exists?" and then
      stores the object without a lock, so two concurrent conditional PUTs of one key could both succeed
      on its threaded server; AWS S3 guarantees exactly one wins. The lock gives the test endpoint that
      guarantee (and only that: everything else runs concurrently as before).
    * Injects answers real S3 gives under faults, for tests that need them (``inject``): a 409
      ConditionalRequestConflict, a lost reply (the write is applied, the client gets a 500 and retries),
      a stall (``stall``: no answer; ``stall_reply``: applied, then no answer) until the faults are
      cleared or ``STALL_LIMIT_S`` passed, by which time the client has given up.
    * ``ignore_conditional`` / ``reject_conditional``: buckets that behave like S3-compatible stores without
      conditional writes (the header is dropped, or answered with 501 NotImplemented).
    * Answers the control requests under ``CONTROL`` that ``RemoteFaults`` sends.
    """

    def __init__(self, app):
        self.app = app
        self.write_lock = threading.Lock()
        self._rules_lock = threading.Lock()
        self._rules: list[list] = []  # [method, key suffix, kind, remaining]
        self.ignore_conditional: set[str] = set()
        self.reject_conditional: set[str] = set()
        self.faults_served: list[tuple[str, str, str]] = []
        self._released = threading.Event()

    def inject(self, method: str, key_suffix: str, kind: str, times: int = 1) -> None:
        assert kind in KINDS
        with self._rules_lock:
            self._rules.append([method.upper(), key_suffix, kind, times])

    def clear(self) -> None:
        with self._rules_lock:
            self._rules.clear()
            self._released.set()  # held requests end
            self._released = threading.Event()
        self.ignore_conditional.clear()
        self.reject_conditional.clear()
        self.faults_served.clear()

    def _take(self, method: str, path: str) -> str | None:
        with self._rules_lock:
            for rule in self._rules:
                if rule[0] == method and path.endswith(rule[1]) and rule[3] > 0:
                    rule[3] -= 1
                    self.faults_served.append((method, path, rule[2]))
                    return rule[2]
        return None

    @staticmethod
    def _error(start_response, status: str, code: str, message: str):
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
            f"<RequestId>lakelog-test</RequestId></Error>"
        ).encode()
        start_response(status, [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
        return [body]

    def _control(self, environ, start_response):
        op = environ["PATH_INFO"][len(CONTROL) + 1:]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        args = json.loads(environ["wsgi.input"].read(length) or b"{}")
        answer: object = None
        if op == "inject":
            self.inject(**args)
        elif op == "clear":
            self.clear()
        elif op in ("ignore_conditional", "reject_conditional"):
            getattr(self, op).add(args["bucket"])
        elif op == "served":
            answer = self.faults_served
        else:
            return self._error(start_response, "404 Not Found", "NoSuchControl", op)
        body = json.dumps(answer).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    def __call__(self, environ, start_response):
        method = environ.get("REQUEST_METHOD", "")
        path = environ.get("PATH_INFO", "")
        if path.startswith(CONTROL + "/"):
            return self._control(environ, start_response)
        bucket = path.lstrip("/").split("/", 1)[0]
        conditional = "HTTP_IF_NONE_MATCH" in environ and method in ("PUT", "POST")
        if conditional and bucket in self.reject_conditional:
            return self._error(start_response, "501 Not Implemented", "NotImplemented", "A header you provided implies functionality that is not implemented")
        if conditional and bucket in self.ignore_conditional:
            del environ["HTTP_IF_NONE_MATCH"]
            conditional = False
        fault = self._take(method, path)
        if fault == "conflict409":
            return self._error(
                start_response, "409 Conflict", "ConditionalRequestConflict",
                "A conflicting conditional operation is currently in progress against this resource. Please try again.",
            )
        if fault in ("lose_reply", "stall_reply"):
            with self.write_lock:
                for _ in self.app(environ, lambda *a, **k: None):
                    pass
        if fault in ("stall", "stall_reply"):
            self._released.wait(STALL_LIMIT_S)  # the client gave up long ago: this answer reaches no one
        if fault is not None:
            return self._error(start_response, "500 Internal Server Error", "InternalError", "We encountered an internal error. Please try again.")
        if conditional:
            with self.write_lock:
                return list(self.app(environ, start_response))
        return self.app(environ, start_response)


class _RemoteSet:
    def __init__(self, faults: "RemoteFaults", op: str):
        self._faults, self._op = faults, op

    def add(self, bucket: str) -> None:
        self._faults._call(self._op, {"bucket": bucket})


class RemoteFaults:
    """The server's ``S3TestMiddleware``, steered from the test process: the same calls and attributes."""

    def __init__(self, url: str):
        self.url = url
        self.ignore_conditional = _RemoteSet(self, "ignore_conditional")
        self.reject_conditional = _RemoteSet(self, "reject_conditional")

    def _call(self, op: str, args: dict | None = None):
        req = urllib.request.Request(f"{self.url}{CONTROL}/{op}", data=json.dumps(args or {}).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def inject(self, method: str, key_suffix: str, kind: str, times: int = 1) -> None:
        assert kind in KINDS
        self._call("inject", {"method": method, "key_suffix": key_suffix, "kind": kind, "times": times})

    def clear(self) -> None:
        self._call("clear")

    @property
    def faults_served(self) -> list[tuple[str, str, str]]:
        return [tuple(f) for f in self._call("served")]


def main() -> int:
    import moto.server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = moto.server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    wsgi_server = getattr(server, "_server", None)
    if wsgi_server is None or not hasattr(wsgi_server, "app"):
        server.stop()
        sys.stderr.write(
            "moto's ThreadedMotoServer no longer exposes its WSGI app as ._server.app, which the S3 tests wrap "
            "to serialize conditional writes and inject faults; adapt tests/s3_server.py to this moto version\n"
        )
        return 1
    wsgi_server.app = S3TestMiddleware(wsgi_server.app)
    host, port = server.get_host_and_port()
    print(f"{host}:{port}", flush=True)
    sys.stdin.read()  # serve until the test process closes our standard input (or dies)
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
