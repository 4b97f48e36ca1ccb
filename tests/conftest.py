import os
import sys
import uuid

import pytest

# Spark's Python workers must run this interpreter (it has pyarrow); set before any session starts.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@pytest.fixture
def table_path(tmp_path):
    """A fresh local table location."""
    return str(tmp_path / "table")


@pytest.fixture(params=["local", "memory"])
def any_table_path(request, tmp_path):
    """A fresh table location on each storage backend."""
    if request.param == "local":
        return str(tmp_path / "table")
    return f"memory://lakelog-tests/{uuid.uuid4().hex}/table"


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
