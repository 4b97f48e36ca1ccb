import logging
import os
import sys
import threading
import uuid

import pytest

from tests.spark_session import spark  # noqa: F401  (one local Spark session per test run)

# Spark's Python workers must run this interpreter (it has pyarrow); set before any session starts.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

S3_BUCKET = "lakelog-tests"


@pytest.fixture
def table_path(tmp_path):
    """A fresh local table location."""
    return str(tmp_path / "table")


@pytest.fixture(params=["local", "memory", "s3"])
def any_table_path(request, tmp_path):
    """A fresh table location on each storage backend.

    For "s3" the path is ``s3://lakelog-tests/<uuid>/table`` on the session's moto server: the
    ``s3_endpoint`` fixture points s3fs (and any subprocess) at it through AWS_* environment variables,
    so the path needs no storage_options.
    """
    return _backend(request, tmp_path).uri


def _backend(request, tmp_path):
    """A ``Backend`` (tests/backends.py) of kind ``request.param``, its store's faults cleared after the test."""
    from tests.backends import Backend

    kind = request.param
    fixture = {"s3": "s3_endpoint", "azure": "azurite", "gcs": "gcs_server"}.get(kind)
    backend = Backend(kind, str(tmp_path), request.getfixturevalue(fixture) if fixture else None)
    if backend.faults is not None:
        backend.faults.clear()
        request.addfinalizer(backend.faults.clear)
    return backend


@pytest.fixture(params=["local", "s3", "azure", "gcs"])
def backend(request, tmp_path):
    """A fresh table on each backend other processes and deltalake reach: local disk, S3 (moto),
    Azure (Azurite) and GCS (fake-gcs-server). See tests/backends.py."""
    return _backend(request, tmp_path)


@pytest.fixture(params=["local", "memory", "s3", "azure", "gcs"])
def any_backend(request, tmp_path):
    """``backend``, and ``memory://`` too (for tests that stay in this process)."""
    return _backend(request, tmp_path)


@pytest.fixture(params=["s3", "azure", "gcs"])
def object_store(request, tmp_path):
    """A fresh table on each object store, with ``faults`` to inject the endpoint's fault answers."""
    return _backend(request, tmp_path)


# ---------------------------------------------------------------- S3 over real HTTP (moto server)


class _S3TestMiddleware:
    """WSGI middleware in front of moto's S3 app.

    * Serializes conditional writes (requests carrying If-None-Match). moto 5.x checks "exists?" and then
      stores the object without a lock, so two concurrent conditional PUTs of one key could both succeed
      on its threaded server; AWS S3 guarantees exactly one wins. The lock gives the test endpoint that
      guarantee (and only that: everything else runs concurrently as before).
    * Injects answers real S3 gives under faults, for tests that need them (``inject``): a 409
      ConditionalRequestConflict, or a lost reply (the write is applied, the client gets a 500 and retries).
    * ``ignore_conditional`` / ``reject_conditional``: buckets that behave like S3-compatible stores without
      conditional writes (the header is dropped, or answered with 501 NotImplemented).
    """

    def __init__(self, app):
        self.app = app
        self.write_lock = threading.Lock()
        self._rules_lock = threading.Lock()
        self._rules: list[list] = []  # [method, key suffix, kind, remaining]
        self.ignore_conditional: set[str] = set()
        self.reject_conditional: set[str] = set()
        self.faults_served: list[tuple[str, str, str]] = []

    def inject(self, method: str, key_suffix: str, kind: str, times: int = 1) -> None:
        assert kind in ("conflict409", "lose_reply")
        with self._rules_lock:
            self._rules.append([method.upper(), key_suffix, kind, times])

    def clear(self) -> None:
        with self._rules_lock:
            self._rules.clear()
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

    def __call__(self, environ, start_response):
        method = environ.get("REQUEST_METHOD", "")
        path = environ.get("PATH_INFO", "")
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
        if fault == "lose_reply":
            with self.write_lock:
                for _ in self.app(environ, lambda *a, **k: None):
                    pass
            return self._error(start_response, "500 Internal Server Error", "InternalError", "We encountered an internal error. Please try again.")
        if conditional:
            with self.write_lock:
                return list(self.app(environ, start_response))
        return self.app(environ, start_response)


class S3Endpoint:
    """The session's S3 endpoint: a moto server on 127.0.0.1 speaking real HTTP."""

    access_key = "testing"
    secret_key = "testing"
    region = "us-east-1"

    def __init__(self, url: str, middleware: "_S3TestMiddleware"):
        self.url = url
        self.bucket = S3_BUCKET
        self.middleware = middleware

    @property
    def env(self) -> dict[str, str]:
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_ENDPOINT_URL": self.url,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
        }

    @property
    def storage_options(self) -> dict[str, str]:
        """Explicit s3fs options (the environment already has them; passing them also works)."""
        return {"endpoint_url": self.url, "key": self.access_key, "secret": self.secret_key}

    @property
    def deltalake_options(self) -> dict[str, str]:
        """storage_options for ``deltalake.DeltaTable`` (delta-rs / object_store)."""
        return {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_ALLOW_HTTP": "true",
        }

    def new_table_uri(self, bucket: str | None = None) -> str:
        return f"s3://{bucket or self.bucket}/{uuid.uuid4().hex}/table"

    def make_bucket(self, name: str) -> None:
        import fsspec

        fs = fsspec.filesystem("s3")
        try:
            fs.mkdir(name)
        except FileExistsError:
            pass


@pytest.fixture(scope="session")
def s3_endpoint():
    """Start moto's ThreadedMotoServer on 127.0.0.1 (a free port) for the whole session.

    AWS_* variables point s3fs (botocore honours AWS_ENDPOINT_URL) and subprocesses at it; they are
    restored when the session ends. The bucket ``lakelog-tests`` is created.
    """
    import moto.server  # every test dependency is installed by `make test`: a missing one is an error
    import s3fs  # noqa: F401

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = moto.server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    wsgi_server = getattr(server, "_server", None)
    if wsgi_server is None or not hasattr(wsgi_server, "app"):
        server.stop()
        raise RuntimeError(
            "moto's ThreadedMotoServer no longer exposes its WSGI app as ._server.app, which the S3 tests wrap "
            "to serialize conditional writes and inject faults; adapt _S3TestMiddleware to this moto version"
        )
    middleware = _S3TestMiddleware(wsgi_server.app)
    wsgi_server.app = middleware
    endpoint = S3Endpoint(f"http://{host}:{port}", middleware)
    mp = pytest.MonkeyPatch()
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "AWS_SECURITY_TOKEN"):
        mp.delenv(name, raising=False)
    for name, value in endpoint.env.items():
        mp.setenv(name, value)
    try:
        endpoint.make_bucket(S3_BUCKET)
        yield endpoint
    finally:
        mp.undo()
        server.stop()


@pytest.fixture
def s3_faults(s3_endpoint):
    """The endpoint's fault-injection middleware, cleared after the test."""
    s3_endpoint.middleware.clear()
    yield s3_endpoint.middleware
    s3_endpoint.middleware.clear()


# ---------------------------------------------------------------- Azure (Azurite) and GCS (fake-gcs-server)

CLOUD_BUCKET = "lakelog-tests"


class CloudEndpoint:
    """An emulator started for the session, and the options that reach it.

    ``storage_options`` work for lakelog and ``deltalake_options`` for delta-rs (the same names where
    delta-rs has them); ``proxy_options`` reach the emulator through ``proxy`` (a ``FaultProxy``).
    The session's environment also points bare ``az://`` / ``gs://`` paths at it.
    """

    def __init__(self, kind, emulator, proxy, storage_options, deltalake_options, proxy_options, env):
        self.kind, self.emulator, self.proxy = kind, emulator, proxy
        self.storage_options, self.deltalake_options, self.proxy_options = storage_options, deltalake_options, proxy_options
        self.env = env
        self.scheme = "az" if kind == "azure" else "gs"
        self.bucket = CLOUD_BUCKET

    def new_table_uri(self, bucket: str | None = None) -> str:
        return f"{self.scheme}://{bucket or self.bucket}/{uuid.uuid4().hex}/table"

    def make_bucket(self, name: str) -> None:
        from lakelog.storage import Storage

        fs = Storage(f"{self.scheme}://{name}", self.storage_options).fs
        try:
            fs.mkdir(name)
        except FileExistsError:
            pass


def _session_env(mp: pytest.MonkeyPatch, env: dict) -> None:
    for name, value in env.items():
        mp.setenv(name, value)


def _serve(endpoint: CloudEndpoint, mp: pytest.MonkeyPatch):
    """Yield ``endpoint`` with its test bucket made; then undo the environment and stop proxy and emulator."""
    try:
        endpoint.make_bucket(CLOUD_BUCKET)
        yield endpoint
    finally:
        mp.undo()
        endpoint.proxy.stop()
        endpoint.emulator.stop()


@pytest.fixture(scope="session")
def azurite(tmp_path_factory):
    """Azurite (blob service) on 127.0.0.1 for the session, with the container ``lakelog-tests``."""
    import adlfs  # noqa: F401  (every test dependency is installed by `make test`: a missing one is an error)

    from tests.emulators import FaultProxy, start_azurite

    emulator = start_azurite(str(tmp_path_factory.mktemp("azurite")))
    proxy = FaultProxy(emulator.url, "azure")
    mp = pytest.MonkeyPatch()
    for name in ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_SAS_TOKEN"):
        mp.delenv(name, raising=False)
    env = {"AZURITE_BLOB_STORAGE_URL": emulator.url, "AZURE_STORAGE_USE_EMULATOR": "true"}
    _session_env(mp, env)
    opts = {"azure_storage_use_emulator": "true"}
    endpoint = CloudEndpoint("azure", emulator, proxy, opts, dict(opts), {**opts, "azure_storage_endpoint": proxy.url}, env)
    yield from _serve(endpoint, mp)


def _gcs_service_account(path, url: str) -> str:
    """A service account file for emulators, as delta-rs reads them: ``gcs_base_url`` and ``disable_oauth``."""
    import json

    path.write_text(json.dumps({"gcs_base_url": url, "disable_oauth": True, "client_email": "", "private_key": "", "private_key_id": ""}))
    return str(path)


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory):
    """fake-gcs-server on 127.0.0.1 for the session, with the bucket ``lakelog-tests``."""
    import gcsfs  # noqa: F401

    from tests.emulators import FaultProxy, start_fake_gcs

    workdir = tmp_path_factory.mktemp("fake-gcs")
    emulator = start_fake_gcs(str(workdir))
    proxy = FaultProxy(emulator.url, "gcs")
    # Google's default credentials are never looked up on the metadata server: point it at a closed local port.
    env = {"STORAGE_EMULATOR_HOST": emulator.url, "NO_GCE_CHECK": "true", "GCE_METADATA_HOST": "127.0.0.1:9", "GCE_METADATA_IP": "127.0.0.1:9"}
    mp = pytest.MonkeyPatch()
    mp.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    _session_env(mp, env)
    opts = {"google_service_account": _gcs_service_account(workdir / "service-account.json", emulator.url)}
    proxy_opts = {"google_service_account": _gcs_service_account(workdir / "proxy-service-account.json", proxy.url)}
    endpoint = CloudEndpoint("gcs", emulator, proxy, opts, dict(opts), proxy_opts, env)
    yield from _serve(endpoint, mp)


@pytest.fixture(params=["azure", "gcs"])
def cloud(request):
    """Each emulated cloud store in turn (``CloudEndpoint``), its fault proxy cleared around the test."""
    endpoint = request.getfixturevalue("azurite" if request.param == "azure" else "gcs_server")
    endpoint.proxy.clear()
    yield endpoint
    endpoint.proxy.clear()


_exit_status = {}


def pytest_sessionfinish(session, exitstatus):
    _exit_status["status"] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    # deltalake's native runtime sometimes aborts the interpreter during shutdown (exit 134) after every
    # test has run and been reported; leave with pytest's own status instead of the runtime's abort.
    if "status" in _exit_status and "deltalake" in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status["status"])
