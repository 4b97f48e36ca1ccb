"""Storage access through fsspec, with the put-if-absent primitive commits rely on.

Commits never use rename: on the local filesystem a temp file is hard-linked to the final name
(``os.link`` fails if the name exists); on object stores the file is written directly with a
conditional create (S3 and Azure ``If-None-Match: *``, GCS ``ifGenerationMatch=0``; fsspec
``mode="create"``). Before the first commit to a bucket (container), a process checks once that the
endpoint really refuses a second conditional create of the same object (some S3-compatible stores and
emulators ignore the condition), and refuses to commit if it does not.

One module per store (``local``, ``memory``, ``s3``, ``azure``, ``gcs``) behind the ``Store`` seam
(``base``); ``Storage`` (``core``) is what the rest of lakelog uses. ``options`` translates delta-rs'
storage option names for S3, Azure and GCS; ``policy`` reads the request options (``timeout``,
``connect_timeout``, ``max_retries``) that bound every request to them, and recognises an endpoint that
did not answer, which ``Storage`` and the stores' Arrow filesystems raise as ``StorageTimeoutError`` /
``StorageUnavailableError`` (``lakelog.errors``).

``storage_options`` keys that start with ``lakelog.`` are lakelog's own and are not passed to fsspec:

* ``lakelog.single_writer`` ("true"/"false"): allow committing on a store without atomic
  put-if-absent. Only safe when a single process ever writes the table.
* ``lakelog.max_commit_attempts`` (int): how many times a commit may lose the race for a version
  before giving up with ``CommitConflictError`` (default: ``transaction.DEFAULT_MAX_ATTEMPTS``).
* ``lakelog.fault_injector`` (callable, for tests): ``injector(op, path)`` is called before every storage
  operation (``OPS``), and ``injector(op + ":done", path)`` after a ``put_if_absent``, ``put`` or
  ``delete`` succeeded. Whatever it raises propagates as if the store had failed: raised before, the
  operation did not happen; raised at ``":done"``, it happened but its reply was lost.

The injection points are the public methods of ``Storage`` (``read``, ``read_many``, ``exists``,
``list_dir``, ``list_files``, ``open_input``, ``open_output``, ``put_if_absent``, ``put``, ``delete``,
``makedirs``). The write path uses them for the log listing, checkpoint reads, data files
(``open_output``), commits, checkpoints and ``_last_checkpoint``. Scans read data files through
pyarrow datasets on ``arrow_fs`` and are not injection points.
"""

from .base import ConditionalWriteConflict, FileInfo, Store, _mtime_ms
from .core import DONE_OPS, OPS, Storage, open_store
from .location import resolve_location

__all__ = ["DONE_OPS", "OPS", "ConditionalWriteConflict", "FileInfo", "Storage", "Store", "_mtime_ms", "open_store", "resolve_location"]
