"""Adding and dropping CHECK constraints (``ALTER TABLE ... ADD/DROP CONSTRAINT``): one metadata commit
each, the protocol upgraded as Delta upgrades it (writer version 3, or the ``checkConstraints`` feature)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..actions import Action
from ..errors import ConstraintViolationError, InvalidArgumentError, InvalidArgumentTypeError
from ..read.scan import candidate_adds, read_batches
from ..log.snapshot import Snapshot
from ..storage import Storage
from ..transaction import Transaction
from ..write import plan_protocol
from ..table_features.row_rules import CONSTRAINT_PREFIX, Constraint, WriterFeatures, table_constraints


def _key(name: str) -> str:
    return CONSTRAINT_PREFIX + name.lower()  # Delta stores constraint names lower-cased


def add_constraints(storage: Storage, constraints: Any) -> int:
    """Add CHECK constraints ({name: Spark SQL expression}) after checking every row of the table
    against them; one ``ADD CONSTRAINT`` commit. Returns the version."""
    if not isinstance(constraints, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in constraints.items()):
        raise InvalidArgumentTypeError(f"add_constraint takes a dict of constraint name -> SQL expression, not {constraints!r}")
    if not constraints:
        raise InvalidArgumentError("add_constraint takes at least one constraint")
    storage.check_atomic_commits()
    snap = Snapshot.load(storage)
    snap.check_writable()
    existing = table_constraints(snap.configuration)
    for name in constraints:
        if not name.strip() or any(c in name for c in "`'\""):
            raise InvalidArgumentError(f"constraint name {name!r} is empty or holds a quote")
        if name.lower() in {n.lower() for n in existing}:
            raise InvalidArgumentError(
                f"the table already has a constraint named {name!r} ({existing[name.lower()]}); drop it first with Table.drop_constraint({name!r})"
            )
    new = WriterFeatures(tuple(Constraint(n.lower(), e) for n, e in constraints.items()))
    new.check_expressions(snap.schema)
    for batch in read_batches(snap.storage, snap.schema, snap.partition_columns, candidate_adds(snap), None, None, snap.column_mapping):
        try:
            new.apply(batch)
        except ConstraintViolationError as e:
            raise ConstraintViolationError(
                f"cannot add CHECK constraint {e.constraint} ({e.expression}): the table (version {snap.version}) has rows that violate it, "
                f"e.g. {e.row}; nothing was committed. Delete or fix those rows first",
                e.constraint, e.expression, e.row,
            ) from None
    configuration = {**snap.configuration, **{_key(n): e for n, e in constraints.items()}}
    actions: list[Action] = []
    protocol = plan_protocol(snap.schema, snap.protocol, configuration, snap.metadata.schema_string)
    if protocol is not None:
        actions.append(protocol)
    actions.append(replace(snap.metadata, configuration=configuration))
    name, expr = ", ".join(n.lower() for n in constraints), " AND ".join(f"({e})" if len(constraints) > 1 else e for e in constraints.values())
    # Rows committed after the check would not have been checked: any concurrent data change conflicts.
    txn = Transaction(storage, snap, "ADD CONSTRAINT", {"name": name, "expr": expr}, read_whole_table=True)
    return txn.commit(actions).version


def drop_constraint(storage: Storage, name: Any, if_exists: bool = False) -> int:
    """Drop a CHECK constraint in one ``DROP CONSTRAINT`` commit; returns the version (unchanged when
    it does not exist and ``if_exists``)."""
    if not isinstance(name, str):
        raise InvalidArgumentTypeError(f"drop_constraint takes a constraint name, not {name!r}")
    storage.check_atomic_commits()
    snap = Snapshot.load(storage)
    snap.check_writer_protocol()
    existing = table_constraints(snap.configuration)
    found = next((k for k in existing if k.lower() == name.lower()), None)
    if found is None:
        if if_exists:
            return snap.version
        raise InvalidArgumentError(f"the table has no constraint named {name!r} (constraints: {sorted(existing) or 'none'})")
    configuration = {k: v for k, v in snap.configuration.items() if k != CONSTRAINT_PREFIX + found}
    params = {"name": found, "expr": existing[found]}
    return Transaction(storage, snap, "DROP CONSTRAINT", params).commit([replace(snap.metadata, configuration=configuration)]).version
