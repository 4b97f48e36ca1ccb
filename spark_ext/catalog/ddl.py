"""CREATE/REPLACE TABLE and ALTER TABLE on lakelog tables, as Spark's catalog hands them over: the
declared columns and clauses become a ``spark_ext.statements.create.Spec`` (``lakelog.write_table``'s arguments, or
a ``format("lakelog")`` write for AS SELECT), and each ALTER TABLE change one of ``lakelog.Table``'s schema
changes. What lakelog does not keep is refused by name."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DataType, StructField, StructType

import lakelog
from lakelog.errors import InvalidArgumentError, TableNotFoundError, UnsupportedFeatureError

from ..statements.create import Spec, check_matches, check_replace, write_spec

_WHAT = {"create": "CREATE TABLE", "createIfNotExists": "CREATE TABLE IF NOT EXISTS", "replace": "REPLACE TABLE",
         "createOrReplace": "CREATE OR REPLACE TABLE"}
_PATH_OPTIONS = ("option.path",)


def _spark_type(text: str) -> DataType:
    return StructType.fromJson({"type": "struct", "fields": [{"name": "c", "type": json.loads(text), "nullable": True, "metadata": {}}]}).fields[0].dataType


def _existing(path: str) -> lakelog.Table | None:
    try:
        return lakelog.Table(path)
    except TableNotFoundError:
        return None


def _refuse_char_types(type_json: str, where: str) -> None:
    import re as _re

    found = _re.search(r'"?((?:var)?char)\((\d+)\)', type_json)
    if found:
        raise UnsupportedFeatureError(f"{where} has type {found.group(1).upper()}({found.group(2)}): lakelog does not enforce "
                                      "CHAR/VARCHAR lengths; use STRING (and a CHECK constraint on length(...) for a limit)")


def spec_of(declared: dict[str, Any], what: str) -> Spec:
    """The ``Spec`` of a statement's columns, partitioning, clustering and properties."""
    spec = Spec(path=declared["location"])
    if declared.get("comment"):
        raise UnsupportedFeatureError(f"{what}: a table COMMENT is not supported (lakelog keeps no table description); leave it out")
    for c in declared.get("columns") or []:
        name = c["name"]
        if c.get("comment"):
            raise UnsupportedFeatureError(f"{what}: column {name}: COMMENT is not supported (lakelog does not store column comments); leave it out")
        kinds = [k for k in ("default", "generation", "identity") if c.get(k) is not None]
        if len(kinds) > 1:
            raise InvalidArgumentError(f"{what}: column {name} cannot be both {' and '.join(kinds)}")
        _refuse_char_types(c["type"], f"{what}: column {name}")
        t = _spark_type(c["type"])
        if c.get("default") is not None:
            spec.defaults[name] = c["default"]
        if c.get("generation") is not None:
            spec.generated[name] = c["generation"]
        if c.get("identity") is not None:
            i = c["identity"]
            if t.simpleString() != "bigint":
                raise InvalidArgumentError(f"{what}: identity column {name} must be BIGINT, not {t.simpleString()} (Delta's rule)")
            spec.identity[name] = {"start": int(i["start"]), "step": int(i["step"]), "allow_explicit_insert": bool(i["allowExplicitInsert"])}
        spec.names.append(name)
        nullable = bool(c["nullable"]) or name in spec.identity  # (lakelog declares identity columns nullable)
        spec.columns.append(f"`{name.replace('`', '``')}` {t.simpleString()}{'' if nullable else ' NOT NULL'}")
    spec.partition_by = list(declared.get("partitionBy") or []) or None
    spec.cluster_by = declared.get("clusterBy")
    props = dict(declared.get("properties") or {})
    options = {k[len("option."):]: v for k, v in props.items() if k.startswith("option.")}
    props = {k: v for k, v in props.items() if not k.startswith("option.")}
    unknown = sorted(k for k in options if k.lower() != "path")
    if unknown:
        raise UnsupportedFeatureError(f"{what}: OPTIONS {unknown} are not supported for lakelog tables (table properties go in TBLPROPERTIES)")
    spec.properties = props or None
    return spec


def create(spark: SparkSession, declared: dict[str, Any], data: DataFrame | None) -> str:
    """Create, register or replace the table ``declared`` describes (``LakelogDDL.create``'s spec); returns
    ``exists`` (nothing to do), ``registered`` (a table was already there) or ``created``."""
    mode = declared["mode"]
    what = _WHAT[mode]
    spec = spec_of(declared, what)
    options = declared.get("writeOptions") or {}
    if options.get("partitionBy") and not spec.partition_by:
        spec.partition_by = [c.strip() for c in str(options["partitionBy"]).split(",") if c.strip()]
    if options.get("clusterBy") and not spec.cluster_by:
        spec.cluster_by = [c.strip() for c in str(options["clusterBy"]).split(",") if c.strip()]
    existing = _existing(spec.path)
    if mode in ("replace", "createOrReplace") and existing is not None:
        _with_session_defaults(spark, spec)
        check_replace(existing, spec, what)
        write_spec(spark, spec, data, replace=True)
        _add_constraints(spec.path, declared)
        return "created"
    if mode == "replace":
        raise TableNotFoundError(f"{what}: there is no lakelog table at {spec.path!r} to replace; use CREATE [OR REPLACE] TABLE")
    if existing is not None:
        if mode == "createIfNotExists" and declared.get("name") is None:
            return "exists"
        if declared.get("managed"):
            raise InvalidArgumentError(f"{what} {declared.get('name')}: the managed table's location {spec.path!r} already holds a "
                                       "lakelog table; drop it or give the table a LOCATION to register it there")
        if data is not None:
            raise InvalidArgumentError(f"{what} ... AS SELECT: a lakelog table already exists at {spec.path!r}; use INSERT INTO, "
                                       "or CREATE OR REPLACE TABLE")
        check_matches(spark, existing, spec, what)
        return "registered"
    if data is None and not spec.columns:
        raise InvalidArgumentError(f"{what}: there is no lakelog table at {spec.path!r}: give the new table's columns, or a query (AS SELECT ...)")
    _with_session_defaults(spark, spec)
    write_spec(spark, spec, data, replace=False)
    _add_constraints(spec.path, declared)
    return "created"


DEFAULTS_PREFIX = "spark.databricks.delta.properties.defaults."  # Delta's session settings for new tables' properties


def session_property_defaults(spark: SparkSession) -> dict[str, str]:
    """The table properties the session gives every new table: ``spark.databricks.delta.properties.defaults.<p>``
    is ``delta.<p>``, as in Delta."""
    try:
        conf = spark.conf.getAll
    except Exception:  # noqa: BLE001 - a session without getAll
        return {}
    return {"delta." + k[len(DEFAULTS_PREFIX):]: str(v) for k, v in conf.items() if k.startswith(DEFAULTS_PREFIX)}


def _with_session_defaults(spark: SparkSession, spec: Spec) -> None:
    defaults = session_property_defaults(spark)
    if defaults:
        spec.properties = {**defaults, **(spec.properties or {})}


def _add_constraints(path: str, declared: dict[str, Any]) -> None:
    checks = declared.get("constraints") or []
    if checks:
        lakelog.Table(path).add_constraint({c["name"]: _check_sql(c["sql"]) for c in checks})


def _check_sql(ddl: str) -> str:
    """The condition of Spark's ``CONSTRAINT name CHECK (cond) ...`` DDL."""
    start = ddl.upper().find("CHECK (")
    if start < 0:
        raise UnsupportedFeatureError(f"only CHECK constraints are supported on lakelog tables, not {ddl}")
    depth, i = 0, start + len("CHECK ")
    for j in range(i, len(ddl)):
        depth += ddl[j] == "("
        depth -= ddl[j] == ")"
        if depth == 0:
            return ddl[i + 1:j]
    return ddl[i + 1:]


_RESERVED_PROPERTIES = {"location": "ALTER TABLE ... SET LOCATION: a lakelog table's location is where its log is; register the table "
                                    "at another location instead (DROP TABLE, then CREATE TABLE name USING lakelog LOCATION '...')",
                        "comment": "a table COMMENT (lakelog keeps no table description)",
                        "owner": "a table owner (lakelog keeps none)"}


def _refusal(c: dict[str, Any], field: str) -> str | None:
    """Why lakelog does not run the change ``c``, or None."""
    op = c["op"]
    if op in ("setProperty", "removeProperty") and c["key"].lower() in _RESERVED_PROPERTIES:
        return _RESERVED_PROPERTIES[c["key"].lower()]
    if op in ("addColumn", "updateColumnType"):
        try:
            _refuse_char_types(c["type"], f"ALTER TABLE: column {field}")
        except UnsupportedFeatureError as e:
            return str(e)
    if op == "addColumn":
        if c.get("comment"):
            return f"ALTER TABLE ADD COLUMNS: column {field}: lakelog does not store column comments"
        if c.get("position"):
            return f"ALTER TABLE ADD COLUMNS: column {field}: {c['position']}: new columns go last"
        if c.get("default"):
            return (f"ALTER TABLE ADD COLUMNS: column {field}: Delta does not take a default when a column is added; "
                    "add the column, then ALTER COLUMN ... SET DEFAULT")
        if not c.get("nullable", True):
            return f"ALTER TABLE ADD COLUMNS: column {field}: a new column cannot be NOT NULL (rows already written have no value; Delta refuses it too)"
    if op == "updateColumnNullability" and not c["nullable"]:
        return (f"ALTER COLUMN {field} SET NOT NULL: not supported (Delta refuses it too: rows already written are not checked); "
                f"add a CHECK constraint instead ({field} IS NOT NULL)")
    if op == "updateColumnComment":
        return f"ALTER COLUMN {field} COMMENT: lakelog does not store column comments"
    if op == "updateColumnPosition":
        return f"ALTER COLUMN {field} {c.get('position')}: lakelog keeps columns in the order they were added"
    if op in ("unsupported", "clusterBy"):
        return f"ALTER TABLE: {c.get('what') or 'CLUSTER BY'} is not supported on lakelog tables"
    return None


def alter(spark: SparkSession, path: str, changes: list[dict[str, Any]]) -> None:
    """Apply an ALTER TABLE's changes, each run of one kind (properties set, columns added, dropped) as one
    lakelog commit. Every change is checked before the first commit, so a refused one commits nothing;
    REPLACE COLUMNS (drops then adds in one statement) is refused: lakelog would commit it in two steps and
    drop the data of the columns that stay."""
    from lakelog.schema.types import schema_from_string

    t = lakelog.Table(path)
    ops = [c["op"] for c in changes]
    if "deleteColumn" in ops and "addColumn" in ops:
        raise UnsupportedFeatureError("ALTER TABLE REPLACE COLUMNS is not supported on lakelog tables: add, drop and rename columns "
                                      "one statement at a time (ADD COLUMNS, DROP COLUMNS, RENAME COLUMN, ALTER COLUMN ... TYPE)")
    for c in changes:
        why = _refusal(c, ".".join(c.get("field") or []))
        if why is not None:
            raise UnsupportedFeatureError(why)
    i = 0
    while i < len(changes):
        op = changes[i]["op"]
        run = [changes[i]]
        while i + len(run) < len(changes) and changes[i + len(run)]["op"] == op and op in ("setProperty", "removeProperty", "addColumn", "deleteColumn"):
            run.append(changes[i + len(run)])
        i += len(run)
        c = run[0]
        field = ".".join(c.get("field") or [])
        if op == "setProperty":
            t.set_properties({c["key"]: c["value"] for c in run})
        elif op == "removeProperty":
            t.unset_properties([c["key"] for c in run], if_exists=True)
        elif op == "addColumn":
            added = {}
            for c in run:
                arrow = schema_from_string(json.dumps({"type": "struct", "fields": [{"name": "c", "type": json.loads(c["type"]), "nullable": True, "metadata": {}}]}))
                added[".".join(c["field"])] = arrow.field(0).type
            t.add_columns(added)
        elif op == "deleteColumn":
            names = [".".join(c["field"]) for c in run if not (c.get("ifExists") and not _has(t.schema, ".".join(c["field"])))]
            if names:
                t.drop_columns(names)
        elif op == "renameColumn":
            t.rename_column(field, c["newName"])
        elif op == "updateColumnType":
            t.alter_column_type(field, _spark_type(c["type"]).simpleString())
        elif op == "updateColumnNullability":
            t.drop_not_null(field)
        elif op == "updateColumnDefaultValue":
            t.set_column_default(field, c.get("default"))
        elif op == "addConstraint":
            t.add_constraint({c["name"]: c["sql"]})
        elif op == "dropConstraint":
            t.drop_constraint(c["name"], if_exists=bool(c.get("ifExists")))
        else:
            raise UnsupportedFeatureError(f"ALTER TABLE: {c.get('what') or op} is not supported on lakelog tables")
        t = lakelog.Table(path)


def _has(schema: pa.Schema, name: str) -> bool:
    from ..statements.alter import _has as has

    return has(schema, name)
