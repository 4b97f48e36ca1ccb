"""Every public function's argument errors are lakelog's typed errors (``LakelogError`` subclasses),
never a bare ValueError/TypeError/KeyError from deep inside: the public API is walked with bad values
for each parameter, and the conflicting combinations a user writes are checked by name."""

from __future__ import annotations

import inspect

import pyarrow as pa
import pytest

import lakelog
from lakelog.errors import LakelogError

BAD_VALUES = [object(), "bogus", -1, 1.5, ["x"], {"x": 1}]
VALID = {
    "data": pa.table({"id": [3], "p": ["a"]}), "updates": {"id": "id"}, "source": pa.table({"id": [1], "p": ["a"]}),
    "predicate": "target.id = source.id", "props": {"delta.appendOnly": "false"}, "old": "id", "new": "id2", "name": "id",
    "schema": pa.schema([("id", pa.int64()), ("p", pa.string())]),
}
FUNCTIONS = {"write_table": lakelog.write_table, "read_table": lakelog.read_table, "convert": lakelog.convert, "plan_write": lakelog.plan_write}
METHODS = sorted(m for m in dir(lakelog.Table) if not m.startswith("_") and callable(getattr(lakelog.Table, m)))


def _table(tmp_path, n=[0]) -> str:  # noqa: B006 - a counter for fresh paths
    n[0] += 1
    path = str(tmp_path / f"t{n[0]}")
    lakelog.write_table(path, pa.table({"id": [1, 2], "p": ["a", "b"]}), partition_by=["p"])
    return path


def _call(fn, kwargs) -> None:
    """Call, and run what a call returns that still needs running (a merge builder)."""
    try:
        out = fn(**kwargs)
        if hasattr(out, "execute"):
            out.when_matched_delete().execute()
    except LakelogError:
        pass  # typed: what the walk asks for


def _required(sig: inspect.Signature, path: str, skip_self: bool = False) -> dict:
    params = list(sig.parameters.items())[1 if skip_self else 0:]
    return {q: (path if q == "path" else VALID.get(q, path)) for q, p in params if p.default is inspect.Parameter.empty}


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a relative path such as "bogus" is a table location: keep it here


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_public_functions_raise_typed_errors_for_bad_arguments(tmp_path, name):
    fn = FUNCTIONS[name]
    sig = inspect.signature(fn)
    for param in sig.parameters:
        for bad in BAD_VALUES:
            kwargs = _required(sig, _table(tmp_path))
            kwargs[param] = bad
            _call(fn, kwargs)  # anything but a LakelogError fails the test


@pytest.mark.parametrize("method", METHODS)
def test_table_methods_raise_typed_errors_for_bad_arguments(tmp_path, method):
    sig = inspect.signature(getattr(lakelog.Table, method))
    for param in list(sig.parameters)[1:]:
        for bad in BAD_VALUES:
            path = _table(tmp_path)
            kwargs = _required(sig, path, skip_self=True)
            kwargs[param] = bad
            _call(getattr(lakelog.Table(path), method), kwargs)


def test_table_constructor_raises_typed_errors_for_bad_arguments(tmp_path):
    for param in inspect.signature(lakelog.Table).parameters:
        for bad in [None, *BAD_VALUES] if param == "path" else BAD_VALUES:
            kwargs = {"path": _table(tmp_path), param: bad}
            _call(lakelog.Table, kwargs)


def test_conflicting_or_malformed_arguments_are_typed_and_name_the_argument(tmp_path):
    path = _table(tmp_path)
    t = lakelog.Table(path)
    one = pa.table({"id": [1], "p": ["a"]})
    cases = [
        (lambda: t.delete("id = 1", app_id="x"), "app_version"),
        (lambda: t.restore(version=0, timestamp="2026-01-01"), "timestamp"),
        (lambda: t.merge(one, "a.id = A.id", source_alias="a", target_alias="A"), "target_alias"),
        (lambda: t.merge(one, "target.id = source.id", schema_mode="overwrite"), "schema_mode"),
        (lambda: lakelog.write_table(path, one, mode="bogus"), "mode"),
        (lambda: lakelog.write_table(path, one, mode="append", predicate="id = 1"), "mode='overwrite'"),
        (lambda: lakelog.write_table(path, one, mode="overwrite", predicate="p = 'a'", partition_overwrite="dynamic"), "predicate"),
        (lambda: t.merge({"id": [1]}, "target.id = source.id").when_matched_delete().execute(), "dict"),
        (lambda: t.merge([1], "target.id = source.id").when_matched_delete().execute(), "list"),
        (lambda: t.merge(None, "target.id = source.id").when_matched_delete().execute(), "NoneType"),
        (lambda: lakelog.write_table(path, one, user_metadata=5), "user_metadata"),
        (lambda: lakelog.write_table(path, one, partition_by=5), "partition_by"),
        (lambda: t.to_pyarrow(columns="id"), "columns"),
        (lambda: lakelog.Table(path, storage_options="x"), "storage_options"),
    ]
    for call, named in cases:
        with pytest.raises(LakelogError) as e:
            call()
        assert named in str(e.value), (named, str(e.value))
        assert isinstance(e.value, (ValueError, TypeError))  # callers catching the builtin kinds still do
    assert lakelog.Table(path).version == 0  # nothing was committed
