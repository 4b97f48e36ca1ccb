"""Checkpoints: their content (Delta's checkpoint schema), reading every kind, writing classic or V2.

Reading (``read_checkpoint_state``) accepts every checkpoint the protocol defines: a classic
``n.checkpoint.parquet`` (V1 spec, or V2 spec with a ``checkpointMetadata`` row and sidecars), a complete
multi-part set ``n.checkpoint.o.p.parquet`` (V1 spec), and a UUID-named ``n.checkpoint.<uuid>.json|parquet``
(V2 spec). Anything malformed (a missing sidecar or part, a V2 checkpoint without exactly one
``checkpointMetadata`` of its version, a V1-only name holding V2 actions, a file named twice) is a
``CorruptLogError``: readers then fall back to an older checkpoint or to the JSON commits.

Writing (``write_checkpoint``): a classic single-file V1 checkpoint by default; with
``delta.checkpointPolicy=v2`` (on a table with the ``v2Checkpoint`` feature) a UUID-named V2 Parquet
checkpoint whose file actions go to sidecars, written batch by batch (see ``lakelog.log.checkpoint.v2``).
Then ``_last_checkpoint`` (``lakelog.log.last_checkpoint``).

Modules: ``schema`` (the checkpoint columns and actions as rows), ``read``, ``write``, ``v2`` (the
``checkpointMetadata`` and ``sidecar`` actions, sidecar files).
"""

from .read import CheckpointState, adds_from_arrow, checkpoint_sidecars, parse_dv, read_checkpoint, read_checkpoint_state
from .schema import CHECKPOINT_SCHEMA, DV_TYPE, NON_FILE_COLUMNS, V2_COLUMNS
from .write import TableState, checkpoint_rows, uses_v2_checkpoints, write_checkpoint

__all__ = [
    "CHECKPOINT_SCHEMA",
    "DV_TYPE",
    "NON_FILE_COLUMNS",
    "V2_COLUMNS",
    "CheckpointState",
    "TableState",
    "adds_from_arrow",
    "checkpoint_rows",
    "checkpoint_sidecars",
    "parse_dv",
    "read_checkpoint",
    "read_checkpoint_state",
    "uses_v2_checkpoints",
    "write_checkpoint",
]
