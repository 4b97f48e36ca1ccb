"""Google Cloud Storage through gcsfs: commits are conditional creates (``ifGenerationMatch=0``).

lakelog opens ``gcsfs.core.GCSFileSystem`` itself rather than the class fsspec registers for ``gs://``:
recent gcsfs releases register a subclass that first asks the gRPC storage-control API for the bucket's
layout (zonal or hierarchical), which against an emulator (or without network access to it) waits
60 s per bucket before falling back. lakelog needs neither zonal appends nor hierarchical renames.
"""

from __future__ import annotations

import errno
import json
import os
from typing import Any

from .base import Store, _mtime_ms, exists_error
from .options import translate, truthy

# delta-rs / object_store key names (lower case) -> gcsfs keyword, or a lakelog-side setting.
_ALIASES = {
    **dict.fromkeys(("google_service_account", "service_account", "google_service_account_path", "service_account_path",
                     "google_application_credentials", "application_credentials"), "service_account_path"),
    **dict.fromkeys(("google_service_account_key", "service_account_key"), "service_account_key"),
    **dict.fromkeys(("google_base_url", "base_url"), "endpoint_url"),
    **dict.fromkeys(("google_skip_signature", "skip_signature"), "skip_signature"),
    **dict.fromkeys(("google_bucket", "google_bucket_name", "bucket", "bucket_name"), "bucket"),
}


def _service_account(info: dict[str, Any], kw: dict[str, Any], token: Any) -> None:
    """object_store's test-only fields (``gcs_base_url``, ``disable_oauth``) as gcsfs settings."""
    if info.get("gcs_base_url"):
        kw.setdefault("endpoint_url", info["gcs_base_url"])
    kw.setdefault("token", "anon" if info.get("disable_oauth") else token)


def gcsfs_options(location_bucket: str, options: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """gcsfs keyword arguments for delta-rs-style (or gcsfs) ``options``, and the secret values among them."""
    from gcsfs.core import GCSFileSystem

    from ..errors import InvalidArgumentError

    kw = translate(options, _ALIASES, GCSFileSystem, "GCS")
    secrets: list[str] = []
    bucket = kw.pop("bucket", None)
    if bucket is not None and bucket != location_bucket:
        raise InvalidArgumentError(f"storage option bucket {bucket!r} differs from the table location's bucket {location_bucket!r}")
    if truthy(kw.pop("skip_signature", False)):
        kw.setdefault("token", "anon")
    if "service_account_key" in kw:
        raw = kw.pop("service_account_key")
        secrets.append(str(raw))
        try:
            info = json.loads(raw) if isinstance(raw, str) else dict(raw)
        except (ValueError, TypeError):
            raise InvalidArgumentError("storage option google_service_account_key is not a service account key (JSON)") from None
        secrets += [str(info[k]) for k in ("private_key", "private_key_id") if info.get(k)]
        _service_account(info, kw, info)
    if "service_account_path" in kw:
        path = os.path.expanduser(str(kw.pop("service_account_path")))
        try:
            with open(path, encoding="utf-8") as f:
                info = json.load(f)
        except (OSError, ValueError) as e:
            raise InvalidArgumentError(f"cannot read the service account file {path!r} of storage option google_service_account: {type(e).__name__}") from None
        secrets += [str(info[k]) for k in ("private_key", "private_key_id") if info.get(k)]
        _service_account(info, kw, path)
    if "token" not in kw and (kw.get("endpoint_url") or os.environ.get("STORAGE_EMULATOR_HOST")):
        # an emulator needs no credentials: without this gcsfs would look for Google's default ones
        # (the metadata server included)
        kw["token"] = "anon"
    kw.setdefault("use_listings_cache", False)
    return kw, tuple(s for s in secrets if len(s) > 3)


class GcsStore(Store):
    atomic_create = True
    probe_once = True  # emulators may not enforce the precondition
    label = "GCS endpoint"
    create_word = "create"
    condition = "ifGenerationMatch=0"
    probe_advice = "Use Google Cloud Storage (it honours it) or an emulator that does (fake-gcs-server)"
    lists_from = True
    object_store = True

    def _list_keys_from(self, bucket: str, prefix: str, start_key: str) -> list[tuple[str, int, int]]:
        kw = {"prefix": prefix, "delimiter": "/", "startOffset": start_key, "maxResults": 1000}
        out = []
        while True:
            page = self.fs.call("GET", "b/{}/o", bucket, json_out=True, **kw)
            out += [(item["name"], int(item.get("size") or 0), _mtime_ms(item)) for item in page.get("items", ())]
            if not page.get("nextPageToken"):
                return out
            kw["pageToken"] = page["nextPageToken"]

    @classmethod
    def connect(cls, location: str, options: dict[str, Any]) -> GcsStore:
        from gcsfs.core import GCSFileSystem

        root = GCSFileSystem._strip_protocol(location)
        kw, secrets = gcsfs_options(root.split("/", 1)[0], options)
        return cls(GCSFileSystem(**kw), root, secrets)

    def create(self, path: str, data: bytes) -> None:
        from gcsfs.retry import HttpError

        try:
            self.fs.pipe_file(path, data, mode="create")  # 412 (generation is not 0) -> FileExistsError
        except FileExistsError as e:
            raise exists_error(path, e) from None
        except HttpError as e:
            status = int(getattr(e, "code", 0) or 0)
            what = self.redact(f"{status}: {e}")
            if status == 501:
                raise OSError(errno.ENOSYS, f"conditional create of {path} not supported: {what}", path) from None
            raise OSError(errno.EREMOTEIO if status >= 500 or status in (408, 429) else errno.EIO,
                          f"GCS answered {what} to the conditional create of {path}", path) from None
        finally:
            self.fs.invalidate_cache(path.rsplit("/", 1)[0])

    def rejects_condition(self, e: BaseException) -> bool:
        return getattr(e, "errno", None) == errno.ENOSYS
