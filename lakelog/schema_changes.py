"""Changes to a table's metadata that rewrite no data: table properties; adding columns (older files
lack them: their rows read NULL there); renaming or dropping columns (which column mapping makes
possible: files name columns by physical name, so only the logical name in ``metaData.schemaString``
changes, and a dropped column's values are simply no longer read); a column's default and a NOT NULL
dropped. Each is one commit of ``metaData`` (and ``protocol`` when a property needs a feature);
every earlier version still reads as it did, through its own metadata.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson
import pyarrow as pa

from .actions import Action
from .column_dependencies import dependents
from .column_mapping import MAX_COLUMN_ID, check_mode_change, mapped_schema_string
from .errors import ColumnMappingRequiredError, InvalidArgumentError, InvalidTablePropertyError, SchemaMismatchError, UnsupportedFeatureError
from .properties import REGISTRY, TableProperties, validate_new
from .schema import arrow_field_to_delta, canonical_type, check_column_names, is_variant_field, schema_from_string, variant_field
from . import collations, iceberg_compat, row_tracking, type_widening
from .snapshot import Snapshot
from .storage import Storage
from .transaction import Transaction
from .write import plan_protocol
from .writer_features import CONSTRAINT_PREFIX

ENABLE_HINT = 'set_properties({"delta.columnMapping.mode": "name"})'


def set_properties(storage: Storage, props: dict[str, Any]) -> int:
    """Set table properties in one ``SET TBLPROPERTIES`` commit; return the table's version after it.

    Values are validated as ``write_table(configuration=...)`` validates them (``InvalidTablePropertyError``,
    nothing committed). A property that needs a table feature upgrades the protocol in the same commit.
    Turning ``delta.columnMapping.mode`` from none to name gives every column an id and keeps its name as
    its physical name (the files already use it); other mode changes are refused, as Delta refuses them.
    Nothing is committed when nothing would change.
    """
    if not isinstance(props, dict) or not props:
        raise InvalidArgumentError(f"set_properties takes a non-empty dict of table properties, not {props!r}")
    new = validate_new(props)
    storage.check_atomic_commits()
    snap = Snapshot.load(storage)
    new = row_tracking.configure(new, snap.configuration)
    old_mode = snap.properties.column_mapping_mode
    configuration = {**snap.configuration, **new}
    new_mode = TableProperties(configuration).column_mapping_mode
    check_mode_change(old_mode, new_mode)
    schema_string = snap.metadata.schema_string
    if new_mode != old_mode:
        max_id = int(snap.configuration.get(MAX_COLUMN_ID, "0") or 0)
        schema_string, max_id = mapped_schema_string(orjson.loads(schema_string), [schema_string], max_id)
        configuration[MAX_COLUMN_ID] = str(max_id)
    schema_string, configuration = iceberg_compat.with_nested_ids(schema_string, configuration)
    protocol = plan_protocol(snap.schema, snap.protocol, configuration)
    if configuration == snap.configuration and protocol is None:
        return snap.version
    actions: list[Action] = [protocol] if protocol is not None else []
    actions.append(replace(snap.metadata, schema_string=schema_string, configuration=configuration))
    if row_tracking.enabled(actions[-1]) and not row_tracking.enabled(snap.metadata):
        actions.extend(row_tracking.backfill(snap.files.values()))  # every live file gets row ids in this commit
    params = {"properties": orjson.dumps(new).decode()}
    return Transaction(storage, snap, "SET TBLPROPERTIES", params).commit(actions).version


def _writable(storage: Storage) -> tuple[Snapshot, dict]:
    """The latest snapshot, checked writable, and its schema as parsed JSON."""
    storage.check_atomic_commits()
    snap = Snapshot.load(storage)
    snap.check_writable()
    return snap, orjson.loads(snap.metadata.schema_string)


def _mapped_snapshot(storage: Storage, what: str) -> Snapshot:
    storage.check_atomic_commits()
    snap = Snapshot.load(storage)
    if not snap.column_mapping.active:
        raise ColumnMappingRequiredError(
            f"{what} needs column mapping (files name columns by physical name, so only the metadata changes), "
            f"and this table does not use it; enable it first with Table.{ENABLE_HINT} (a metadata-only commit; "
            "readers then need Delta reader version 2)"
        )
    snap.check_writable()
    return snap


def _locate(fields: list[dict], path: str) -> tuple[list[dict], int, list[str]]:
    """(the field list holding the column ``path``, its index there, its path as names). A name with
    dots is first looked up whole at the top level, then as a path through structs."""
    for i, f in enumerate(fields):
        if f.get("name") == path:
            return fields, i, [path]
    parts = path.split(".")
    current, names = fields, []
    for depth, part in enumerate(parts):
        idx = next((i for i, f in enumerate(current) if f.get("name") == part), None)
        if idx is None:  # names resolve ignoring case, as Delta resolves them
            idx = next((i for i, f in enumerate(current) if str(f.get("name")).lower() == part.lower()), None)
        if idx is None:
            where = f"in struct {'.'.join(names)!r}" if names else "in the table"
            raise SchemaMismatchError(f"column {path!r} does not exist: no field {part!r} {where}")
        names.append(current[idx]["name"])
        if depth == len(parts) - 1:
            return current, idx, names
        t = current[idx].get("type")
        if not (isinstance(t, dict) and t.get("type") == "struct"):
            raise SchemaMismatchError(f"column {path!r} does not exist: {'.'.join(names)!r} is not a struct")
        current = t["fields"]
    raise SchemaMismatchError(f"column {path!r} does not exist")


def _check_unreferenced(snap: Snapshot, names: list[str], what: str) -> None:
    """Refuse (as Delta refuses it) to ``what`` ("rename", "drop", "change the type of") the column at
    ``names`` when a CHECK constraint, generation expression or invariant reads it: it would stop
    meaning what it says. The message says what can be done instead."""
    found = dependents(snap.writer_features, names)
    if what == "drop":  # an invariant of the dropped column (or of a field inside it) goes with it
        found.invariants = [c for c in found.invariants if not _within(c.name, names)]
    if what == "change the type of":  # Delta keeps invariants across type changes (x > 0 still holds)
        found.invariants = []
    if not found:
        return
    column = ".".join(names)
    if found.generated:
        g = found.generated[0]
        also = "" if len(found.generated) == 1 else f" (and {', '.join(repr(o.name) for o in found.generated[1:])})"
        raise SchemaMismatchError(
            f"cannot {what} column {column!r}: generated column {g.name!r} ({g.expression}){also} reads it, and Delta allows "
            f"neither that nor changing a generation expression. Drop the generated column first (Table.drop_column({g.name!r}): "
            "its values go with it, and a generated column cannot be added back), or copy the rows to a new table declared "
            "with write_table(..., generated_columns=...) in terms of the new column"
        )
    if found.constraints:
        listed = ", ".join(f"{c.name} ({c.expression})" for c in found.constraints)
        first = found.constraints[0].name
        raise SchemaMismatchError(
            f"cannot {what} column {column!r}: CHECK constraint(s) {listed} read it, as Delta refuses. Drop them first "
            f"(Table.drop_constraint({first!r})) and add them back afterwards if they still apply (Table.add_constraint checks every row)"
        )
    listed = ", ".join(f"{c.label} ({c.expression})" for c in found.invariants)
    raise SchemaMismatchError(
        f"cannot {what} column {column!r}: {listed} read(s) it, and invariants (a legacy Delta feature) cannot be changed; "
        "copy the rows to a new table declared with a CHECK constraint instead"
    )


def _within(path: str, names: list[str]) -> bool:
    parts = path.lower().split(".")
    return parts[: len(names)] == [n.lower() for n in names]


def _commit_schema(storage: Storage, snap: Snapshot, schema: dict, partition_columns: list[str], operation: str, params: dict) -> int:
    schema_string = orjson.dumps(schema).decode()
    schema_from_string(schema_string)  # still a valid schema (names unique, types readable)
    metadata = replace(snap.metadata, schema_string=schema_string, partition_columns=partition_columns)
    return Transaction(storage, snap, operation, params).commit([metadata]).version


def rename_column(storage: Storage, old: str, new: str) -> int:
    """Rename column ``old`` (``"a.b"``: field ``b`` of struct ``a``) to ``new`` (the new name of that
    field) in one ``RENAME COLUMN`` commit; return the new version. Needs column mapping."""
    if not isinstance(new, str) or not new or not isinstance(old, str) or not old:
        raise InvalidArgumentError(f"rename_column takes two non-empty column names, not {old!r} and {new!r}")
    snap = _mapped_snapshot(storage, f"renaming column {old!r}")
    schema = orjson.loads(snap.metadata.schema_string)
    fields, idx, names = _locate(schema["fields"], old)
    _check_unreferenced(snap, names, "rename")
    if new == fields[idx]["name"]:
        return snap.version
    clash = next((f["name"] for j, f in enumerate(fields) if j != idx and f["name"].lower() == new.lower()), None)
    if clash is not None:
        raise SchemaMismatchError(f"cannot rename {old!r} to {new!r}: a column {clash!r} already exists there (names are case-insensitive)")
    fields[idx] = collations.renamed({**fields[idx], "name": new}, fields[idx]["name"])
    parts = list(snap.partition_columns)
    if len(names) == 1 and names[0] in parts:
        parts[parts.index(names[0])] = new
    new_path = ".".join(names[:-1] + [new])
    return _commit_schema(storage, snap, schema, parts, "RENAME COLUMN", {"oldColumnPath": old, "newColumnPath": new_path})


def drop_column(storage: Storage, name: str) -> int:
    """Drop column ``name`` (``"a.b"``: field ``b`` of struct ``a``) in one ``DROP COLUMNS`` commit;
    return the new version. Needs column mapping; partition columns cannot be dropped (as in Delta)."""
    return drop_columns(storage, [name])


def drop_columns(storage: Storage, names: list[str]) -> int:
    """Drop the columns ``names`` (each as ``drop_column`` takes it) in one ``DROP COLUMNS`` commit."""
    if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) and n for n in names):
        raise InvalidArgumentError(f"drop_column(s) takes non-empty column names, not {names!r}")
    snap = _mapped_snapshot(storage, f"dropping column(s) {list(names)}")
    schema = orjson.loads(snap.metadata.schema_string)
    for name in names:
        fields, idx, found = _locate(schema["fields"], name)
        _check_unreferenced(snap, found, "drop")
        if len(found) == 1 and found[0] in snap.partition_columns:
            raise SchemaMismatchError(f"cannot drop partition column {name!r} (Delta does not allow it); rewrite the table without it instead")
        if len(fields) == 1:
            what = "a struct's only field" if len(found) > 1 else "the table's only column"
            raise SchemaMismatchError(f"cannot drop {name!r}: it is {what}")
        if len(found) == 1 and len(fields) - 1 == len(snap.partition_columns):
            raise SchemaMismatchError(f"cannot drop {name!r}: a table needs at least one column that is not a partition column")
        del fields[idx]
    return _commit_schema(storage, snap, schema, list(snap.partition_columns), "DROP COLUMNS", {"columns": orjson.dumps(list(names)).decode()})


_SPARK_TYPE_NAMES = {"tinyint": "byte", "smallint": "short", "int": "integer", "bigint": "long", "real": "float", "decimal": "decimal(10,0)"}


def _type_name(new_type: str) -> str:
    t = new_type.strip().lower().replace(" ", "")
    for alias in ("numeric(", "dec("):  # Spark's other names for decimal
        if t.startswith(alias):
            t = "decimal(" + t[len(alias):]
    return _SPARK_TYPE_NAMES.get(t, t)


def alter_column_type(storage: Storage, name: str, new_type: str) -> int:
    """Widen column ``name`` to ``new_type`` (a Delta or Spark SQL type name: ``long``/``bigint``,
    ``double``, ``decimal(12,2)``, ``timestamp_ntz``) in one ``CHANGE COLUMN`` commit, as Delta's
    ``ALTER TABLE ... ALTER COLUMN ... TYPE`` does: only Delta's type widenings (``lakelog.type_widening``),
    on data and partition columns, struct fields (``a.b``), array elements (``arr.element``) and map keys
    and values (``m.key``, ``m.value``, nested as ``a.element.value``); the table must have
    ``delta.enableTypeWidening`` set. The change is recorded in ``delta.typeChanges`` and data files are
    not rewritten (readers cast older files). ``SchemaMismatchError`` for a change Delta refuses."""
    if not isinstance(name, str) or not name or not isinstance(new_type, str) or not new_type.strip():
        raise InvalidArgumentError(f"alter_column_type takes a column name and a type name, not {name!r} and {new_type!r}")
    to_type = _type_name(new_type)
    snap, schema = _writable(storage)
    target = type_widening.locate(schema["fields"], name)
    from_type = target.type
    if not isinstance(from_type, str):
        raise SchemaMismatchError(
            f"column {target.path!r} is a {from_type.get('type')}; widen its fields, elements ('.element'), keys ('.key') or values ('.value') one by one"
        )
    if from_type == to_type:
        return snap.version
    if not type_widening.is_widening(from_type, to_type):
        raise SchemaMismatchError(
            f"cannot change column {target.path!r} from {from_type} to {to_type}: that is not one of Delta's type widenings, "
            f"which widen {from_type} to {type_widening.widenings_of(from_type)}; rewrite the table for other changes"
        )
    props = snap.properties
    if (props.get("delta.enableIcebergCompatV1") or props.get("delta.enableIcebergCompatV2")) and not type_widening.is_iceberg_widening(from_type, to_type):
        raise SchemaMismatchError(
            f"cannot change column {target.path!r} from {from_type} to {to_type}: the table has Iceberg compatibility on, and Iceberg "
            "allows only integer widening, float to double and decimal precision increases at the same scale"
        )
    if not props.get(type_widening.ENABLE):
        raise UnsupportedFeatureError(
            f"changing column {target.path!r} from {from_type} to {to_type} is a type widening, which this table does not allow: "
            f'enable it first with Table.set_properties({{"{type_widening.ENABLE}": "true"}}) (a metadata-only commit; '
            "readers then need the typeWidening table feature)"
        )
    if not target.field_path and any(k.startswith("delta.identity.") for k in target.field.get("metadata") or {}):
        raise SchemaMismatchError(f"cannot change the type of identity column {target.path!r} (Delta does not allow it)")
    _check_unreferenced(snap, target.names, "change the type of")
    target.widen(to_type)
    schema_string = orjson.dumps(schema).decode()
    new_schema = schema_from_string(schema_string)
    protocol = plan_protocol(new_schema, snap.protocol, snap.configuration, schema_string)
    actions: list[Action] = [protocol] if protocol is not None else []
    actions.append(replace(snap.metadata, schema_string=schema_string))
    params = {"column": orjson.dumps({**target.field, "name": target.path}).decode()}
    return Transaction(storage, snap, "CHANGE COLUMN", params).commit(actions).version


def unset_properties(storage: Storage, keys: list[str], if_exists: bool = False) -> int:
    """Remove table properties in one ``UNSET TBLPROPERTIES`` commit; return the table's version after it.

    A key the table does not have is an error unless ``if_exists``. Properties lakelog maintains
    (``delta.columnMapping.maxColumnId``, ...) and CHECK constraints (``drop_constraint``) are refused;
    removing ``delta.columnMapping.mode`` is refused as turning column mapping off is. Nothing is committed
    when nothing would change."""
    if not isinstance(keys, (list, tuple)) or not keys or not all(isinstance(k, str) and k for k in keys):
        raise InvalidArgumentError(f"unset_properties takes a non-empty list of property names, not {keys!r}")
    storage.check_atomic_commits()
    snap = Snapshot.load(storage)
    configuration = dict(snap.configuration)
    removed = []
    for key in keys:
        found = key if key in configuration else next((k for k in configuration if k.lower().startswith("delta.") and k.lower() == key.lower()), None)
        if key.lower().startswith(CONSTRAINT_PREFIX):
            raise InvalidArgumentError(f"table property {key!r} is a CHECK constraint; drop it with drop_constraint")
        prop = REGISTRY.get(key.lower())
        if prop is not None and not prop.settable:
            raise InvalidTablePropertyError(f"table property {prop.key} is maintained by the engine and cannot be removed", key=prop.key, value=None)
        if found is None:
            if if_exists:
                continue
            raise InvalidArgumentError(f"the table has no property {key!r} (it has {sorted(configuration)}); to ignore a missing one, pass if_exists=True")
        del configuration[found]
        removed.append(found)
    if not removed:
        return snap.version
    check_mode_change(snap.properties.column_mapping_mode, TableProperties(configuration).column_mapping_mode)
    snap.check_writable(configuration)
    metadata = replace(snap.metadata, configuration=configuration)
    params = {"properties": orjson.dumps(removed).decode(), "ifExists": bool(if_exists)}
    return Transaction(storage, snap, "UNSET TBLPROPERTIES", params).commit([metadata]).version


def add_columns(storage: Storage, columns: dict[str, Any]) -> int:
    """Add nullable columns in one ``ADD COLUMNS`` commit; return the new version. ``columns``: name ->
    ``pyarrow.DataType`` (or a nullable ``pyarrow.Field``: ``lakelog.variant_field(name)`` adds a variant
    column, a field with collations a collated column, the protocol upgraded for it); ``"a.b"`` adds
    field ``b`` to struct ``a``.
    New columns go last (in their struct); rows written before read NULL there. NOT NULL columns are
    refused, as in Delta (older rows have no value)."""
    if not isinstance(columns, dict) or not columns:
        raise InvalidArgumentError(f"add_columns takes a non-empty dict of column name -> pyarrow type, not {columns!r}")
    snap, schema = _writable(storage)
    added = []
    for name, t in columns.items():
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"add_columns takes non-empty column names, not {name!r}")
        variant, given = False, None
        if isinstance(t, pa.Field):
            if not t.nullable:
                raise SchemaMismatchError(f"cannot add column {name!r} as NOT NULL: the table's rows have no value there (Delta refuses it too)")
            variant, given, t = is_variant_field(t), t, t.type
        if not isinstance(t, pa.DataType):
            raise InvalidArgumentError(f"add_columns takes a pyarrow type for column {name!r}, not {t!r}")
        parent, leaf = name.rsplit(".", 1) if "." in name else (None, name)
        fields = schema["fields"]
        if parent is not None:
            parents, idx, _ = _locate(schema["fields"], parent)
            pt = parents[idx]["type"]
            if not (isinstance(pt, dict) and pt.get("type") == "struct"):
                raise SchemaMismatchError(f"cannot add {name!r}: {parent!r} is not a struct")
            fields = pt["fields"]
        clash = next((f["name"] for f in fields if f["name"].lower() == leaf.lower()), None)
        if clash is not None:
            raise SchemaMismatchError(f"cannot add column {name!r}: a column {clash!r} already exists there (names are case-insensitive)")
        field = arrow_field_to_delta(variant_field(leaf) if variant else pa.field(leaf, canonical_type(t), True))
        if given is not None:  # (a collated string field keeps its collations, keyed from its new name)
            field = collations.renamed({**field, "metadata": collations.delta_metadata(given)}, given.name)
        fields.append(field)
        added.append({"column": {**field, "name": name}})
    configuration = dict(snap.configuration)
    if snap.column_mapping.active:
        # (new fields carry no mapping metadata: they get fresh ids and physical names; the others keep theirs)
        schema_string, max_id = mapped_schema_string(schema, [snap.metadata.schema_string], int(configuration.get(MAX_COLUMN_ID, "0") or 0))
        configuration[MAX_COLUMN_ID] = str(max_id)
        schema_string, configuration = iceberg_compat.with_nested_ids(schema_string, configuration)
    else:
        schema_string = orjson.dumps(schema).decode()
    new_schema = schema_from_string(schema_string)
    check_column_names(new_schema, mapped=snap.column_mapping.active)
    protocol = plan_protocol(new_schema, snap.protocol, configuration, schema_string)
    actions: list[Action] = [protocol] if protocol is not None else []
    actions.append(replace(snap.metadata, schema_string=schema_string, configuration=configuration))
    return Transaction(storage, snap, "ADD COLUMNS", {"columns": orjson.dumps(added).decode()}).commit(actions).version


def set_column_default(storage: Storage, name: str, expression: str | None) -> int:
    """Set (``expression``: Spark SQL, a constant) or drop (None) the default of top-level column ``name``
    in one ``CHANGE COLUMN`` commit; return the new version. Writes that lack the column store the
    default from then on (the ``allowColumnDefaults`` feature is enabled); rows already written keep
    their values."""
    from .writer_features import DEFAULT_KEY
    from .writer_features.generated import check_default

    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"set_column_default takes a column name, not {name!r}")
    if expression is not None and (not isinstance(expression, str) or not expression.strip()):
        raise InvalidArgumentError(f"a column default is a Spark SQL expression (or None to drop it), not {expression!r}")
    snap, schema = _writable(storage)
    idx = next((i for i, f in enumerate(schema["fields"]) if f["name"] == name), None)
    if idx is None:
        idx = next((i for i, f in enumerate(schema["fields"]) if f["name"].lower() == name.lower()), None)
    if idx is None:
        raise SchemaMismatchError(f"column {name!r} does not exist (columns: {[f['name'] for f in schema['fields']]}); defaults are set on top-level columns")
    field = schema["fields"][idx]
    meta = dict(field.get("metadata") or {})
    if expression is not None and any(k in meta for k in ("delta.generationExpression", "delta.identity.start")):
        raise SchemaMismatchError(f"column {field['name']!r} is a generated or identity column; it cannot have a default")
    if expression is None:
        if DEFAULT_KEY not in meta:
            return snap.version
        del meta[DEFAULT_KEY]
    else:
        check_default(expression, snap.schema.field(field["name"]))
        meta[DEFAULT_KEY] = expression
    schema["fields"][idx] = {**field, "metadata": meta}
    schema_string = orjson.dumps(schema).decode()
    protocol = plan_protocol(snap.schema, snap.protocol, snap.configuration, schema_string)
    actions: list[Action] = [protocol] if protocol is not None else []
    actions.append(replace(snap.metadata, schema_string=schema_string))
    return Transaction(storage, snap, "CHANGE COLUMN", {"column": orjson.dumps(schema["fields"][idx]).decode()}).commit(actions).version


def drop_not_null(storage: Storage, name: str) -> int:
    """Let column ``name`` (``"a.b"`` for a struct's field) hold NULL, in one ``CHANGE COLUMN`` commit;
    return the new version (unchanged when it already may). Making a column NOT NULL is not offered:
    Delta refuses it too (rows already written are not checked)."""
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"drop_not_null takes a column name, not {name!r}")
    snap, schema = _writable(storage)
    fields, idx, names = _locate(schema["fields"], name)
    if fields[idx].get("nullable", True):
        return snap.version
    fields[idx] = {**fields[idx], "nullable": True}
    params = {"column": orjson.dumps({**fields[idx], "name": ".".join(names)}).decode()}
    return _commit_schema(storage, snap, schema, list(snap.partition_columns), "CHANGE COLUMN", params)
