"""Google Cloud Storage through gcsfs: commits are conditional creates (``ifGenerationMatch=0``).

lakelog opens ``gcsfs.core.GCSFileSystem`` itself rather than the class fsspec registers for ``gs://``:
recent gcsfs releases register a subclass that first asks the gRPC storage-control API for the bucket's
layout (zonal or hierarchical), which against an emulator (or without network access to it) waits
60 s per bucket before falling back. lakelog needs neither zonal appends nor hierarchical renames.

Requests follow the store's ``RequestPolicy`` (``lakelog.storage.policy``): gcsfs sends each with
aiohttp's defaults (five minutes) and tries it six times whatever it is told, so the filesystem lakelog
opens gives each request the policy's connect and read timeouts and tries it ``max_retries + 1``
times, with gcsfs's own backoff and its judgement of what is worth retrying.
"""

from __future__ import annotations

import errno
import json
import os
from typing import Any

from .base import Store, _mtime_ms, class_made_on_first_use, exists_error
from .options import translate, truthy
from .policy import RequestPolicy

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


def gcsfs_options(location_bucket: str, options: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...], RequestPolicy]:
    """gcsfs keyword arguments for delta-rs-style (or gcsfs) ``options``, the secret values among them,
    and the request policy."""
    from gcsfs.core import GCSFileSystem

    from ..errors import InvalidArgumentError

    kw, policy = translate(options, _ALIASES, GCSFileSystem, "GCS", "google_")
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
    return kw, tuple(s for s in secrets if len(s) > 3), policy


@class_made_on_first_use(globals(), "PolicyGCSFileSystem")
def _filesystem_class() -> type:
    """gcsfs's core filesystem with a ``RequestPolicy`` (keyword ``lakelog_policy``); defined on first
    use, when gcsfs is imported."""
    import asyncio
    import random

    import aiohttp
    from gcsfs.core import GCSFileSystem
    from gcsfs.retry import HttpError, is_retriable

    send = GCSFileSystem._request.__wrapped__  # one request, without gcsfs's six tries

    class PolicyGCSFileSystem(GCSFileSystem):
        def __init__(self, *args: Any, lakelog_policy: RequestPolicy = RequestPolicy(), **kwargs: Any):
            super().__init__(*args, **kwargs)
            self._policy = p = lakelog_policy
            self.requests_timeout = aiohttp.ClientTimeout(sock_connect=p.connect_timeout, sock_read=p.timeout)

        async def _request(self, *args: Any, **kwargs: Any) -> Any:
            for attempt in range(self._policy.attempts):
                if attempt:
                    await asyncio.sleep(min(random.random() + 2 ** (attempt - 1), 32))  # gcsfs's backoff
                try:
                    return await send(self, *args, **kwargs)
                except (HttpError, aiohttp.ClientError, asyncio.TimeoutError) as e:
                    if attempt == self._policy.max_retries or not (is_retriable(e) or isinstance(e, asyncio.TimeoutError)):
                        raise

    return PolicyGCSFileSystem


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
        fs_class = _filesystem_class()
        root = fs_class._strip_protocol(location)
        kw, secrets, policy = gcsfs_options(root.split("/", 1)[0], options)
        store = cls(fs_class(lakelog_policy=policy, **kw), root, secrets)
        store.policy = policy
        return store

    def endpoint(self) -> str:
        return str(self.fs._location)

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
