"""Tables named by relative paths on a real standalone cluster (tests/spark_cluster.py): the driver and
each executor run in different working directories, so a path resolved anywhere but on the driver
names another directory (local mode has one working directory and cannot tell).

The short form (a partitioned batch write, a LakelogTable merge and a SQL INSERT, one driver process)
runs in every test run; LAKELOG_CLUSTER_FULL=1 adds reads of every kind, streams, the change feed,
spark_ext.sql's statements and a driver that changes directory.
"""

import os

import deltalake
import pyarrow as pa
import pytest

import lakelog
from tests.spark_cluster import StandaloneCluster, run_driver

FULL = os.environ.get("LAKELOG_CLUSTER_FULL") == "1"

# One JVM set at a time: these run on the xdist worker that runs the other Spark tests (make test uses
# --dist loadgroup), not beside their session.
pytestmark = pytest.mark.xdist_group("spark")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = StandaloneCluster(str(tmp_path_factory.mktemp("cluster")))
    yield c
    c.stop()


@pytest.fixture(scope="module")
def short_run(cluster, tmp_path_factory):
    """The short form's driver, run once: (its working directory, what each step saw)."""
    cwd = str(tmp_path_factory.mktemp("driver"))
    return cwd, run_driver(cluster, "cluster_driver.py", cwd, "write", "merge", "sql_insert")


def written(ids=range(20)) -> dict:
    return {i: (str(i % 2), i * 10) for i in ids}


def merged() -> dict:
    return written() | {i: (str(i % 2), i * 100) for i in range(15, 25)}


def inserted() -> dict:
    return merged() | {100: ("0", 1), 101: ("1", 2)}


def as_rows(expected: dict) -> list:
    return sorted([i, p, v] for i, (p, v) in expected.items())


def table_rows(path: str, version: int | None = None) -> tuple[list, list]:
    """The table's rows (id, p, v) as lakelog and as deltalake read them."""
    ours = lakelog.Table(path, version=version).to_pyarrow().select(["id", "p", "v"]).to_pylist()
    peer = deltalake.DeltaTable(path, version=version).to_pyarrow_table().select(["id", "p", "v"]).to_pylist()
    return sorted([r["id"], r["p"], r["v"]] for r in ours), sorted([r["id"], r["p"], r["v"]] for r in peer)


def step(out: dict, name: str):
    got = out[name]
    assert not (isinstance(got, dict) and "error" in got), f"step {name} failed: {got['error']}\n{got.get('trace', '')}"
    return got


def assert_nothing_on_executors(cluster: StandaloneCluster) -> None:
    """No table file was written where an executor ran (only its own logs are there)."""
    dirs = cluster.executor_dirs()
    assert dirs  # executors ran, in their own directories
    strays = [os.path.join(d, f) for ex in dirs for d, _, files in os.walk(ex) for f in files if f not in ("stdout", "stderr")]
    assert strays == []


def test_relative_partitioned_write_commits_files_the_log_names(cluster, short_run):
    cwd, out = short_run
    path = os.path.join(cwd, "events")
    assert step(out, "write") == as_rows(written())  # Spark reads back what it wrote
    assert lakelog.Table(path, version=0).partition_columns == ["p"]
    ours, peer = table_rows(path, version=0)
    assert ours == peer == as_rows(written())  # every file the log names exists, under the driver's directory
    assert_nothing_on_executors(cluster)


def test_relative_merge(cluster, short_run):
    cwd, out = short_run
    assert step(out, "merge") == as_rows(merged())
    ours, peer = table_rows(os.path.join(cwd, "events"), version=1)
    assert ours == peer == as_rows(merged())
    assert_nothing_on_executors(cluster)


def test_relative_sql_insert(cluster, short_run):
    cwd, out = short_run
    assert step(out, "sql_insert") == [[100, "0", 1], [101, "1", 2]]
    ours, peer = table_rows(os.path.join(cwd, "events"))
    assert ours == peer == as_rows(inserted())
    assert lakelog.Table(os.path.join(cwd, "events")).version == 2
    assert_nothing_on_executors(cluster)


@pytest.mark.skipif(not FULL, reason="the full cluster run: set LAKELOG_CLUSTER_FULL=1")
def test_relative_paths_on_every_spark_path(cluster, tmp_path):
    cwd = str(tmp_path)
    out = run_driver(cluster, "cluster_driver.py", cwd, "write", "merge", "sql_insert", "reads", "stream", "change_feed", "sql", "chdir")
    assert step(out, "sql_insert") == [[100, "0", 1], [101, "1", 2]]
    latest = inserted()
    assert step(out, "reads") == {
        "filtered": [[1], [3], [5], [7], [9]], "pushed": [[1], [3], [5], [7], [9]], "v0": 20, "file_url": len(latest),
        "native": [[1], [3], [5], [7], [9]], "native_v0": 20,
    }

    # stream: the snapshot when it started, then (after a restart) only the version appended since
    streamed = sorted(latest) + [200, 201, 202, 203]
    assert step(out, "stream") == [[i] for i in streamed]
    copy = os.path.join(cwd, "copy")
    assert sorted(lakelog.Table(copy).to_pyarrow()["id"].to_pylist()) == streamed
    assert sorted(deltalake.DeltaTable(copy).to_pyarrow_table()["id"].to_pylist()) == streamed

    feed = step(out, "change_feed")
    peer = pa.table(deltalake.DeltaTable(os.path.join(cwd, "feed")).load_cdf(starting_version=0).read_all()).to_pylist()
    expected = sorted([r["id"], r["s"], r["_change_type"], r["_commit_version"]] for r in peer)
    assert [r for r in expected if r[2] != "insert"] == [[1, "1", "update_preimage", 1], [1, "one", "update_postimage", 1], [2, "2", "delete", 2]]
    assert feed["batch"] == feed["stream"] == expected

    sql = step(out, "sql")
    assert sql["named"] == [[2, "z"], [3, "c"], [4, "d"]]
    assert sql["ctas"] == [[3, "c"], [4, "d"]]
    assert sql["time_travel"] == [[0], [1], [2]]
    named = os.path.join(cwd, "named")
    assert sql["history"] == len(lakelog.Table(named).history())
    assert sorted(deltalake.DeltaTable(named).to_pyarrow_table()["id"].to_pylist()) == [2, 3, 4]
    assert sorted(lakelog.Table(os.path.join(cwd, "ctas")).to_pyarrow()["id"].to_pylist()) == [3, 4]

    # After os.chdir in the driver, a relative path still names what Spark's own file sources name.
    n = len(streamed)
    assert step(out, "chdir") == {"table": n, "sql": n, "native": n, "load": n, "spark_text": True}
    assert sorted(lakelog.Table(os.path.join(cwd, "after_chdir")).to_pyarrow()["id"].to_pylist()) == [1, 2]
    assert not os.path.exists(os.path.join(cwd, "elsewhere", "after_chdir"))
    assert_nothing_on_executors(cluster)
