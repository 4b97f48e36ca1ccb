import os
import sys
import uuid

import pytest
from hypothesis import settings

from tests.backends import ALL_STORES, OBJECT_STORES, SHARED_STORES, Backend
from tests.spark_session import spark  # noqa: F401  (one local Spark session per test run)

# Property tests run the same examples on every run unless a long random run is asked for
# (LAKELOG_FUZZ_EXAMPLES=N); a test's own settings still override this.
settings.register_profile("seeded", derandomize=True, database=None)
settings.register_profile("random")
settings.load_profile("random" if os.environ.get("LAKELOG_FUZZ_EXAMPLES") else "seeded")

# Spark's Python workers must run this interpreter (it has pyarrow); set before any session starts.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

S3_BUCKET = "lakelog-tests"


@pytest.fixture(autouse=True)
def _iceberg_steps_done():
    """UniForm's Iceberg steps run after a commit returns: each test's are done (and their failures raised)
    before the next test starts, so none outlives its test's table or reaches another test's flush."""
    yield
    if "lakelog.iceberg.background" in sys.modules:
        from lakelog import iceberg

        iceberg.flush()


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
    kind = request.param
    fixture = {"s3": "s3_endpoint", "azure": "azurite", "gcs": "gcs_server"}.get(kind)
    backend = Backend(kind, str(tmp_path), request.getfixturevalue(fixture) if fixture else None)
    if backend.faults is not None:
        backend.faults.clear()
        request.addfinalizer(backend.faults.clear)
    return backend


@pytest.fixture(params=SHARED_STORES)
def backend(request, tmp_path):
    """A fresh table on each backend other processes and deltalake reach: local disk, S3 (moto),
    Azure (Azurite) and GCS (fake-gcs-server). See tests/backends.py."""
    return _backend(request, tmp_path)


@pytest.fixture(params=ALL_STORES)
def any_backend(request, tmp_path):
    """``backend``, and ``memory://`` too (for tests that stay in this process)."""
    return _backend(request, tmp_path)


@pytest.fixture(params=OBJECT_STORES)
def object_store(request, tmp_path):
    """A fresh table on each object store, with ``faults`` to inject the endpoint's fault answers."""
    return _backend(request, tmp_path)


# ---------------------------------------------------------------- S3 over real HTTP (moto server)


class S3Endpoint:
    """The session's S3 endpoint: a moto server on 127.0.0.1 speaking real HTTP (tests/s3_server.py);
    ``middleware`` injects its faults."""

    access_key = "testing"
    secret_key = "testing"
    region = "us-east-1"

    def __init__(self, url: str, middleware):
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
def s3_endpoint(tmp_path_factory):
    """Start moto's server on 127.0.0.1 (a free port), in a process of its own, for the whole session.

    AWS_* variables point s3fs (botocore honours AWS_ENDPOINT_URL) and subprocesses at it; they are
    restored when the session ends. The bucket ``lakelog-tests`` is created.
    """
    import subprocess

    import s3fs  # noqa: F401  (every test dependency is installed by `make test`: a missing one is an error)

    from tests.s3_server import RemoteFaults

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    log = tmp_path_factory.mktemp("moto") / "server.log"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "tests.s3_server"], cwd=repo, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=err, text=True)
    address = proc.stdout.readline().strip()
    if not address:
        proc.wait(timeout=30)
        raise RuntimeError(f"the S3 test server (moto) did not start ({proc.returncode}): {log.read_text()[-3000:]}")
    url = f"http://{address}"
    endpoint = S3Endpoint(url, RemoteFaults(url))
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
        proc.stdin.close()  # the server stops when its standard input closes
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


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


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory):
    """fake-gcs-server on 127.0.0.1 for the session, with the bucket ``lakelog-tests``."""
    import gcsfs  # noqa: F401

    from tests.emulators import FaultProxy, gcs_service_account, start_fake_gcs

    workdir = tmp_path_factory.mktemp("fake-gcs")
    emulator = start_fake_gcs(str(workdir))
    proxy = FaultProxy(emulator.url, "gcs")
    # Google's default credentials are never looked up on the metadata server: point it at a closed local port.
    env = {"STORAGE_EMULATOR_HOST": emulator.url, "NO_GCE_CHECK": "true", "GCE_METADATA_HOST": "127.0.0.1:9", "GCE_METADATA_IP": "127.0.0.1:9"}
    mp = pytest.MonkeyPatch()
    mp.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    _session_env(mp, env)
    opts = {"google_service_account": gcs_service_account(workdir / "service-account.json", emulator.url)}
    proxy_opts = {"google_service_account": gcs_service_account(workdir / "proxy-service-account.json", proxy.url)}
    endpoint = CloudEndpoint("gcs", emulator, proxy, opts, dict(opts), proxy_opts, env)
    yield from _serve(endpoint, mp)


@pytest.fixture(params=["azure", "gcs"])
def cloud(request):
    """Each emulated cloud store in turn (``CloudEndpoint``), its fault proxy cleared around the test."""
    endpoint = request.getfixturevalue("azurite" if request.param == "azure" else "gcs_server")
    endpoint.proxy.clear()
    yield endpoint
    endpoint.proxy.clear()


def pytest_collection_modifyitems(config, items):
    # Under pytest-xdist (make test: -n 2 --dist loadgroup) every test using the Spark session runs on one
    # worker, so the run starts one JVM, not one per worker.
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("spark"))


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
