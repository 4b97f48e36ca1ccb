"""What lakelog's Spark classes ask of this Python process (``LakelogPython`` on the JVM side).

Each call names a method and passes a Spark session and arguments; the work is lakelog's public API and
``spark_ext``'s Spark jobs (``spark_ext.read`` for scans, ``format("lakelog")`` for writes, ``LakelogTable``
for row-level changes and maintenance). A failure goes back as ``ERROR_MARK`` + a JSON object with the
error's type, message and error class, which the JVM raises as an ``AnalysisException`` with that class.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import threading
from typing import Any

import orjson
from pyspark.sql import Column, DataFrame, SparkSession

import lakelog
from lakelog.errors import InvalidArgumentError, InvalidVersionError, LakelogError, TableNotFoundError, UnsupportedFeatureError

from ..cluster.paths import local_path
from ..jvm import PYTHON_INTERFACE

ERROR_MARK = "\0lakelog-error\0"


_TASK_ERROR = re.compile(r"lakelog\.errors\.(\w+): (.+)")


def failure(e: BaseException) -> Any:
    """What the JVM raises for ``e``: lakelog's error (also one a Spark task raised, which Spark reports as
    the Python worker's exception) as ``ERROR_MARK`` + JSON; Spark's own errors as they are."""
    from lakelog import errors

    if not isinstance(e, errors.LakelogError) and type(e).__name__ != "SqlError":
        found = _TASK_ERROR.findall(str(e))
        cls = getattr(errors, found[-1][0], None) if found else None
        if isinstance(cls, type) and issubclass(cls, errors.LakelogError):
            e = cls(found[-1][1].strip())
        else:
            origin = getattr(e, "_origin", None) or getattr(e, "java_exception", None)
            if origin is not None:
                return origin
    return ERROR_MARK + orjson.dumps({"type": type(e).__name__, "message": _message(e), "errorClass": error_class(e)}).decode()


def lakelog_error(e: BaseException) -> BaseException | None:
    """The lakelog error an exception of Spark's carries (error class ``LAKELOG_<NAME>``), or None."""
    condition = None
    try:
        condition = e.getCondition()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - not one of Spark's errors
        return None
    if not condition or not str(condition).startswith("LAKELOG_"):
        return None
    from lakelog import errors

    from ..statements.syntax import SqlError

    by_class = {_class_name(c): c for c in list(vars(errors).values()) + [SqlError]
                if isinstance(c, type) and issubclass(c, Exception)}
    cls = by_class.get(str(condition))
    if cls is None:
        return None
    return cls(re.sub(r"^\[[A-Z_.]+\]\s*", "", str(getattr(e, "_desc", None) or e).split("\n\nJVM stacktrace:")[0]).strip())


def _class_name(cls: type) -> str:
    name = cls.__name__
    name = name[:-len("Error")] if name.endswith("Error") and name != "Error" else name
    return "LAKELOG_" + re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


def error_class(e: BaseException) -> str:
    """The error class of ``e`` in Spark: ``LAKELOG_<ERROR NAME>`` (``LAKELOG_TABLE_NOT_FOUND``) for lakelog's
    errors, ``LAKELOG_INTERNAL`` for anything else."""
    for cls in type(e).__mro__:
        if cls.__module__ == "lakelog.errors" or cls.__name__ == "SqlError":
            return _class_name(cls)
    return "LAKELOG_INTERNAL"


_SQL_STATES = {"TableNotFoundError": "42P01", "TableExistsError": "42P07", "UnsupportedFeatureError": "0A000",
               "CommitConflictError": "2D521", "ConstraintViolationError": "23001", "SchemaMismatchError": "42K09",
               "InvalidArgumentError": "22023", "VersionNotFoundError": "22003"}


def error_classes() -> dict[str, str]:
    """Every error class lakelog reports, with its SQLSTATE (that of its nearest listed base, else KD000)."""
    from lakelog import errors

    from ..statements.syntax import SqlError

    out = {"LAKELOG_INTERNAL": "XX000", _class_name(SqlError): "42601"}
    for cls in vars(errors).values():
        if isinstance(cls, type) and issubclass(cls, errors.LakelogError):
            state = next((_SQL_STATES[c.__name__] for c in cls.__mro__ if c.__name__ in _SQL_STATES), "KD000")
            out[_class_name(cls)] = state
    return out


def _message(e: BaseException) -> str:
    text = str(e).strip()
    # An AnalysisException raised by Spark inside a callback already names its class: keep the message only.
    return re.sub(r"^\[[A-Z_.]+\]\s*", "", text) if text else type(e).__name__


class Bridge:
    """The Python side of ``org.apache.spark.sql.lakelog.LakelogPython``."""

    class Java:
        implements = [PYTHON_INTERFACE]

    def __init__(self, sc):
        self._sc = sc
        self._loaded = _Loaded()

    def call(self, method: str, jsession, text: str, objects) -> Any:
        try:
            spark = self._session(jsession)

            def resolve(d: dict) -> Any:
                return objects.get(d["$object"]) if d.keys() == {"$object"} else d

            kwargs = json.loads(text, object_hook=resolve)
            return getattr(self, "_" + method)(spark, **kwargs)
        except BaseException as e:  # noqa: BLE001 - every failure goes back to the JVM as a typed error
            return failure(e)

    def _session(self, jsession) -> SparkSession:
        active = SparkSession._instantiatedSession
        if active is not None and jsession is not None and active._jsparkSession.equals(jsession):
            return active
        return SparkSession(self._sc, jsession)

    # ------------------------------------------------------------ catalog
    def _exists(self, spark, path: str) -> str:
        try:
            lakelog.Table(local_path(path, spark))
        except TableNotFoundError:
            return "false"
        return "true"

    def _samePath(self, spark, a: str, b: str) -> str:
        return "true" if local_path(a, spark).rstrip("/") == local_path(b, spark).rstrip("/") else "false"

    def _table(self, spark, path: str, version: Any = None, timestamp: Any = None) -> str:
        from .tables import table_info

        table = lakelog.Table(local_path(path, spark), version=_version(version), timestamp=_timestamp(timestamp))
        self._loaded.put(table)
        return table_info(table)

    def _read(self, spark, path: str, version: Any) -> Any:
        from ..table import LakelogTable

        path = local_path(path, spark)
        table = self._loaded.get(path, int(version)) or lakelog.Table(path, version=int(version))
        return LakelogTable(spark, path).snapshot_df(table=table)._jdf

    # ------------------------------------------------------------ DDL
    def _create(self, spark, spec: str, data: Any = None) -> str:
        from .ddl import create

        declared = json.loads(spec)
        declared["location"] = local_path(declared["location"], spark)
        return create(spark, declared, None if data is None else DataFrame(data, spark))

    def _alter(self, spark, path: str, changes: str) -> str:
        from .ddl import alter

        alter(spark, local_path(path, spark), json.loads(changes))
        return "done"

    # ------------------------------------------------------------ writes
    def _write(self, spark, path: str, data: Any, spec: str) -> str:
        s = json.loads(spec)
        writer = DataFrame(data, spark).write.format("lakelog").mode(s["mode"])
        options = {k: v for k, v in (s.get("options") or {}).items()}
        if s.get("replaceWhere"):
            from lakelog.table_features.table_expressions import to_engine_sql

            options["replaceWhere"] = to_engine_sql(s["replaceWhere"], "REPLACE WHERE predicate")
        metadata = _user_metadata(spark)
        if metadata is not None:
            options.setdefault("userMetadata", metadata)
        if s.get("dynamic"):
            options["partitionOverwriteMode"] = "dynamic"
        elif s["mode"] == "overwrite":
            options.setdefault("partitionOverwriteMode", "static")
        writer.options(**options).save(local_path(path, spark))
        return "done"

    # ------------------------------------------------------------ row-level changes
    def _update(self, spark, path: str, condition: Any, set: dict) -> str:
        from ..table import LakelogTable

        assignments = {k: _column(v) for k, v in set.items()}
        table = LakelogTable.forPath(spark, local_path(path, spark))
        metrics = table.update(_column(condition), assignments, userMetadata=_user_metadata(spark)) if assignments else {}
        return orjson.dumps([int(metrics.get("num_updated_rows", metrics.get("numUpdatedRows", 0)) or 0)]).decode()

    def _delete(self, spark, path: str, condition: Any) -> str:
        from ..table import LakelogTable

        metrics = LakelogTable.forPath(spark, local_path(path, spark)).delete(_column(condition), userMetadata=_user_metadata(spark))
        return orjson.dumps([int(metrics.get("num_deleted_rows", metrics.get("numDeletedRows", 0)) or 0)]).decode()

    def _merge(self, spark, path: str, targetAlias: str, source: Any, condition: Any, clauses: Any, schemaEvolution: bool) -> str:
        from ..table import LakelogTable

        target = LakelogTable.forPath(spark, local_path(path, spark)).alias(targetAlias)
        builder = target.merge(DataFrame(source, spark), _column(condition))
        for clause in clauses:
            kind, action = clause["kind"], clause["action"]
            cond = _column(clause.get("condition"))
            every = bool(clause.get("all"))
            values = clause.get("set")
            set_ = {k: _column(v) for k, v in values.items()} if values is not None else None
            if kind == "matched":
                if action == "delete":
                    builder = builder.whenMatchedDelete(cond)
                elif every:
                    builder = builder.whenMatchedUpdateAll(cond)
                else:
                    builder = builder.whenMatchedUpdate(cond, set_)
            elif kind == "not_matched":
                builder = builder.whenNotMatchedInsertAll(cond) if every else builder.whenNotMatchedInsert(cond, set_)
            elif action == "delete":
                builder = builder.whenNotMatchedBySourceDelete(cond)
            else:
                builder = builder.whenNotMatchedBySourceUpdate(cond, set_)
        if schemaEvolution:
            builder = builder.withSchemaEvolution()
        m = builder.execute(userMetadata=_user_metadata(spark))
        updated, deleted, inserted = (int(m.get(k, 0) or 0) for k in ("num_target_rows_updated", "num_target_rows_deleted", "num_target_rows_inserted"))
        return orjson.dumps([updated + deleted + inserted, updated, deleted, inserted]).decode()

    # ------------------------------------------------------------ Delta's commands
    def _commandSchema(self, spark, text: str) -> str:
        from .commands import command_schema

        return command_schema(text).json()

    def _command(self, spark, text: str) -> Any:
        from .commands import run

        return run(spark, text)._jdf

    def _changeFeed(self, spark, path: str, options: dict, streaming: bool) -> Any:
        reader = spark.readStream if streaming else spark.read
        return reader.format("lakelog").options(**options).load(local_path(path, spark))._jdf

    def _tableChanges(self, spark, table: str, start: Any, end: Any) -> Any:
        from .commands import table_changes

        return table_changes(spark, table, start, end)._jdf


USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"  # Delta's session setting for commitInfo.userMetadata


def _user_metadata(spark: SparkSession) -> str | None:
    value = spark.conf.get(USER_METADATA_CONF, None)
    return value if value else None


def _column(value: Any) -> Column | None:
    if value is None:
        return None
    from pyspark.sql.classic.column import Column as ClassicColumn

    return ClassicColumn(value)


def _version(value: Any) -> int | None:
    if value is None:
        return None
    text = str(value).strip()
    if not text.isdigit():
        raise InvalidVersionError(f"VERSION AS OF takes a table version (a whole number >= 0), not {value!r}")
    return int(text)


def _timestamp(micros: Any) -> dt.datetime | None:
    if micros is None:
        return None
    return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=int(micros))


class _Loaded:
    """The tables the catalog loaded last, by (path, version): a query's analysis asks for a table's schema,
    then for its read plan at that version, which reuses the snapshot (a version never changes)."""

    SIZE = 4

    def __init__(self):
        self._tables: dict[tuple[str, int], lakelog.Table] = {}
        self._lock = threading.Lock()

    def put(self, table: lakelog.Table) -> None:
        with self._lock:
            self._tables.pop((table.path, table.version), None)
            self._tables[(table.path, table.version)] = table
            while len(self._tables) > self.SIZE:
                self._tables.pop(next(iter(self._tables)))

    def get(self, path: str, version: int) -> lakelog.Table | None:
        with self._lock:
            return self._tables.get((path, version))


_bridges: dict[int, Bridge] = {}
_lock = threading.Lock()


def bridge_for(sc) -> Bridge:
    with _lock:
        b = _bridges.get(id(sc))
        if b is None or b._sc is not sc:
            b = _bridges[id(sc)] = Bridge(sc)
        return b
