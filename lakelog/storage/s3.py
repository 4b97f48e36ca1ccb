"""S3 through s3fs: commits are conditional PUTs (``If-None-Match: *``, fsspec ``mode="create"``)."""

from __future__ import annotations

import errno

from .base import ConditionalWriteConflict, Store, _mtime_ms, exists_error


def _client_error_info(e: BaseException) -> tuple[str, int | None]:
    """(error code, HTTP status) of the botocore ClientError behind an s3fs exception, if any."""
    seen = 0
    while e is not None and seen < 5:
        resp = getattr(e, "response", None)
        if isinstance(resp, dict):
            code = str((resp.get("Error") or {}).get("Code") or "")
            status = (resp.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            return code, int(status) if status is not None else None
        e = e.__cause__ or e.__context__
        seen += 1
    return "", None


def _is_precondition_failed(e: BaseException) -> bool:
    code, status = _client_error_info(e)
    return code == "PreconditionFailed" or status == 412


def _is_conditional_conflict(e: BaseException) -> bool:
    code, status = _client_error_info(e)
    return code == "ConditionalRequestConflict" or status == 409 or "ConditionalRequestConflict" in str(e)


class S3Store(Store):
    atomic_create = True
    probe_once = True  # S3-compatible services may ignore or reject If-None-Match
    label = "S3 endpoint"
    create_word = "PUT"
    condition = "If-None-Match: *"
    probe_advice = "Use an S3 service that supports conditional writes (AWS S3 does since 2024)"
    lists_from = True
    object_store = True

    def _list_keys_from(self, bucket: str, prefix: str, start_key: str) -> list[tuple[str, int, int]]:
        from fsspec.asyn import sync

        async def pages() -> list[tuple[str, int, int]]:
            # StartAfter is exclusive: a bare version number is never an object name, and every file of
            # that version sorts after it.
            kw = {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/", "StartAfter": start_key}
            out = []
            while True:
                page = await self.fs._call_s3("list_objects_v2", **kw)
                out += [(c["Key"], int(c.get("Size") or 0), _mtime_ms(c)) for c in page.get("Contents", ())]
                if not page.get("IsTruncated"):
                    return out
                kw["ContinuationToken"] = page["NextContinuationToken"]

        return sync(self.fs.loop, pages)

    def create(self, path: str, data: bytes) -> None:
        try:
            self.fs.pipe_file(path, data, mode="create")
        except FileExistsError:
            raise
        except OSError as e:
            if _is_precondition_failed(e):  # 412 without the Condition detail s3fs looks for
                raise exists_error(path, e) from e
            if _is_conditional_conflict(e):
                raise ConditionalWriteConflict(errno.EBUSY, f"concurrent conditional write to {path}: {e}", path) from e
            raise
        finally:
            self.fs.invalidate_cache(path.rsplit("/", 1)[0])

    def rejects_condition(self, e: BaseException) -> bool:
        code, status = _client_error_info(e)
        return code in ("NotImplemented", "InvalidArgument") or status == 501 or getattr(e, "errno", None) == errno.ENOSYS
