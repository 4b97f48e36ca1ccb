"""The once-per-process check that a store really refuses a second conditional create of one name.

S3-compatible services and emulators may ignore the condition (the second create succeeds) or reject
it (an answer such as 501 NotImplemented); either way lakelog cannot commit there safely.
"""

from __future__ import annotations

import threading
import uuid

from ..errors import StorageError
from .base import ConditionalWriteConflict, Store
from .policy import unanswered

# (filesystem token, bucket) pairs whose conditional create was checked in this process.
_verified_conditional_put: set[tuple[str, str]] = set()
_verify_lock = threading.Lock()

SINGLE_WRITER_ADVICE = "storage_options={'lakelog.single_writer': 'true'} if only one process ever writes this table"


def verify_conditional_create(store: Store, log_dir: str) -> None:
    """Create a probe object under ``log_dir`` twice (and delete it): the second create must fail."""
    scope = store.scope()
    key = (store.token(), scope)
    if key in _verified_conditional_put:
        return
    with _verify_lock:
        if key in _verified_conditional_put:
            return
        probe = f"{log_dir}/.lakelog-put-if-absent-probe-{uuid.uuid4().hex}"
        where = f"the {store.label} for {store.scope_word} {scope!r}"
        advice = f"{store.probe_advice}, or pass {SINGLE_WRITER_ADVICE}."
        answered = True
        try:
            try:
                store.create(probe, b"1")
            except OSError as e:
                if store.rejects_condition(e):
                    raise StorageError(
                        f"{where} does not support conditional {store.create_word} ({store.condition}): "
                        f"{store.redact(str(e))}. lakelog cannot commit safely there. {advice}"
                    ) from None
                raise
            try:
                store.create(probe, b"2")
            except (FileExistsError, ConditionalWriteConflict):
                _verified_conditional_put.add(key)
                return
            raise StorageError(
                f"{where} ignores {store.condition} (a second conditional {store.create_word} of the same object "
                f"succeeded), so it has no put-if-absent and concurrent commits could overwrite each other. {advice}"
            )
        except Exception as e:
            answered = unanswered(e) is None
            raise
        finally:
            if answered:  # an endpoint that did not answer the probe would not answer its deletion either
                try:
                    store.fs.rm_file(probe)
                except Exception:
                    pass
