"""Azure Blob Storage and ADLS Gen2 through adlfs: commits are conditional creates (``If-None-Match: *``).

adlfs's ``pipe_file(mode="create")`` uploads with ``overwrite=False``, which the Azure SDK sends as
``If-None-Match: *``; the answers are typed here (409 ``BlobAlreadyExists`` and 412 ``ConditionNotMet``:
the name exists). The create itself is never retried by the SDK: an answer with an unknown outcome
reaches the commit loop, which looks at the version again and recognises its own commit by ``txnId``.

Every other request follows the store's ``RequestPolicy`` (``lakelog.storage.policy``): the SDK's
connection and read timeouts and its exponential retries, bounded to ``max_retries``. adlfs builds its
service client with the SDK's defaults (a read may wait 60 s, four times, 15 s and more apart), so the
filesystem lakelog opens builds it again with the policy's. Data files are read through Arrow's own
Azure client where it can be configured exactly (``arrow_options``) and no request option was given:
that client has fixed limits of its own (60 s per read, 3 retries), which an explicit ``timeout``,
``connect_timeout`` or ``max_retries`` would not bind, so with any of them set adlfs reads the data too.
"""

from __future__ import annotations

import errno
import os
import re
from typing import Any

from .base import Store, class_made_on_first_use, exists_error
from .options import translate, truthy
from .policy import RequestPolicy

# Azurite's account and key: published by Microsoft, the same for every installation.
EMULATOR_ACCOUNT = "devstoreaccount1"
EMULATOR_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
EMULATOR_URL = "http://127.0.0.1:10000"

# delta-rs / object_store key names (lower case) -> adlfs keyword, or a lakelog-side setting.
_ALIASES = {
    **dict.fromkeys(("azure_storage_account_name", "account_name"), "account_name"),
    **dict.fromkeys(("azure_storage_account_key", "azure_storage_access_key", "azure_storage_master_key",
                     "access_key", "account_key", "master_key"), "account_key"),
    **dict.fromkeys(("azure_storage_sas_key", "azure_storage_sas_token", "sas_key", "sas_token"), "sas_token"),
    **dict.fromkeys(("azure_storage_client_id", "azure_client_id", "client_id"), "client_id"),
    **dict.fromkeys(("azure_storage_client_secret", "azure_client_secret", "client_secret"), "client_secret"),
    **dict.fromkeys(("azure_storage_tenant_id", "azure_storage_authority_id", "azure_tenant_id", "azure_authority_id",
                     "tenant_id", "authority_id"), "tenant_id"),
    **dict.fromkeys(("azure_storage_connection_string", "connection_string"), "connection_string"),
    **dict.fromkeys(("azure_storage_use_emulator", "use_emulator"), "use_emulator"),
    **dict.fromkeys(("azure_storage_endpoint", "azure_endpoint", "endpoint"), "endpoint"),
    **dict.fromkeys(("azure_skip_signature", "skip_signature"), "anon"),
    **dict.fromkeys(("azure_use_azure_cli", "azure_storage_use_azure_cli", "use_azure_cli"), "use_azure_cli"),
}
_SECRET_KEYS = ("account_key", "sas_token", "client_secret", "connection_string")
_SECRET_ENV = ("AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_CLIENT_SECRET", "AZURE_STORAGE_CONNECTION_STRING")


def adlfs_options(options: dict[str, Any]) -> tuple[dict[str, Any], RequestPolicy]:
    """adlfs keyword arguments for delta-rs-style (or adlfs) ``options``, and the request policy; see
    the module docstring."""
    from adlfs import AzureBlobFileSystem

    kw, policy = translate(options, _ALIASES, AzureBlobFileSystem, "Azure", "azure_")
    emulator = kw.pop("use_emulator", None)
    endpoint = kw.pop("endpoint", None)
    if emulator is None and not kw.keys() & {"account_key", "sas_token", "connection_string", "client_secret", "credential"}:
        emulator = os.environ.get("AZURE_STORAGE_USE_EMULATOR")
    if "anon" in kw:
        kw["anon"] = truthy(kw["anon"])
    if truthy(kw.pop("use_azure_cli", False)):
        from azure.identity.aio import AzureCliCredential

        kw.setdefault("credential", AzureCliCredential())
    if emulator is not None and truthy(emulator):
        account = kw.pop("account_name", None) or EMULATOR_ACCOUNT
        key = kw.pop("account_key", None) or EMULATOR_KEY
        url = (endpoint or os.environ.get("AZURITE_BLOB_STORAGE_URL") or EMULATOR_URL).rstrip("/")
        kw["connection_string"] = f"DefaultEndpointsProtocol=http;AccountName={account};AccountKey={key};BlobEndpoint={url}/{account};"
    elif endpoint is not None:
        account = kw.get("account_name") or os.environ.get("AZURE_STORAGE_ACCOUNT_NAME", "")
        if "account_key" in kw:
            kw["connection_string"] = f"AccountName={account};AccountKey={kw.pop('account_key')};BlobEndpoint={endpoint.rstrip('/')};"
        elif "sas_token" in kw:
            kw["connection_string"] = f"BlobEndpoint={endpoint.rstrip('/')};SharedAccessSignature={kw.pop('sas_token').lstrip('?')};"
        else:
            kw["account_host"] = re.sub(r"^https://", "", endpoint.rstrip("/"))
    return kw, policy


@class_made_on_first_use(globals(), "PolicyBlobFileSystem")
def _filesystem_class() -> type:
    """adlfs's filesystem, its service client built with a ``RequestPolicy`` (keyword
    ``lakelog_policy``); defined on first use, when adlfs is imported."""
    from adlfs import AzureBlobFileSystem
    from azure.storage.blob.aio import BlobServiceClient, ExponentialRetry

    class PolicyBlobFileSystem(AzureBlobFileSystem):
        def __init__(self, *args: Any, lakelog_policy: RequestPolicy = RequestPolicy(), **kwargs: Any):
            self._policy = lakelog_policy
            super().__init__(*args, **kwargs)

        def do_connect(self) -> None:
            super().do_connect()
            sc, p = self.service_client, self._policy
            # the SDK's exponential backoff (3 s, 5 s, 9 s, ..., each within a second), max_retries of them
            n = p.max_retries
            retry = ExponentialRetry(initial_backoff=1, increment_base=2, retry_total=n, retry_connect=n, retry_read=n, retry_status=n,
                                     random_jitter_range=1)
            self.service_client = BlobServiceClient(
                sc.url, credential=sc.credential, connection_timeout=p.connect_timeout, read_timeout=p.timeout, retry_policy=retry)

    return PolicyBlobFileSystem


def _secrets(kw: dict[str, Any]) -> tuple[str, ...]:
    found = [str(kw[k]) for k in _SECRET_KEYS if kw.get(k)] + [os.environ[k] for k in _SECRET_ENV if os.environ.get(k)]
    for cs in [s for s in found if "=" in s and ";" in s]:  # the parts of a connection string, too
        found += [v for k, _, v in (p.partition("=") for p in cs.split(";")) if k.lower() in ("accountkey", "sharedaccesssignature") and v]
    return tuple(sorted(set(found), key=len, reverse=True))


def _connection_parts(cs: str) -> dict[str, str]:
    return {k.strip().lower(): v for k, _, v in (p.partition("=") for p in cs.split(";") if p)}


def arrow_options(kw: dict[str, Any]) -> dict[str, Any] | None:
    """``pyarrow.fs.AzureFileSystem`` arguments equivalent to adlfs's ``kw``, when they can be stated
    exactly (an account with a key, a SAS token or a service principal, at Azure's endpoints or at one
    path-style endpoint such as Azurite's); None otherwise (credential objects, anonymous access, the
    default credential chain, other endpoints), and adlfs serves the reads too."""
    if kw.get("credential") is not None or kw.get("anon") or kw.get("account_host"):
        return None
    cs = kw.get("connection_string")
    if cs is None and not kw.get("account_name"):
        cs = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    parts = _connection_parts(cs) if cs else {}
    account = parts.get("accountname") or kw.get("account_name") or (None if cs else os.environ.get("AZURE_STORAGE_ACCOUNT_NAME"))
    out: dict[str, Any] = {"account_name": account}
    if cs:
        out.update(account_key=parts.get("accountkey"), sas_token=parts.get("sharedaccesssignature"))
    else:
        env_key = os.environ.get("AZURE_STORAGE_ACCOUNT_KEY") if not kw.get("account_name") else None
        out.update(account_key=kw.get("account_key") or env_key, sas_token=kw.get("sas_token"),
                   client_id=kw.get("client_id"), client_secret=kw.get("client_secret"), tenant_id=kw.get("tenant_id"))
    if out.get("sas_token"):
        out["sas_token"] = out["sas_token"].lstrip("?")
    service_principal = all(out.get(k) for k in ("client_id", "client_secret", "tenant_id"))
    if not account or not (out.get("account_key") or out.get("sas_token") or service_principal):
        return None
    endpoint = parts.get("blobendpoint")
    if endpoint:
        from urllib.parse import urlsplit

        u = urlsplit(endpoint)
        if u.path.strip("/") == account:  # path-style, as emulators are addressed
            authority = u.netloc
        elif not u.path.strip("/") and u.netloc.startswith(account + "."):
            authority = u.netloc[len(account):]
        else:
            return None
        out.update(blob_storage_authority=authority, dfs_storage_authority=authority.replace(".blob.", ".dfs."),
                   blob_storage_scheme=u.scheme, dfs_storage_scheme=u.scheme)
    elif parts.get("endpointsuffix") or parts.get("defaultendpointsprotocol"):
        suffix, scheme = parts.get("endpointsuffix", "core.windows.net"), parts.get("defaultendpointsprotocol", "https")
        out.update(blob_storage_authority=f".blob.{suffix}", dfs_storage_authority=f".dfs.{suffix}",
                   blob_storage_scheme=scheme, dfs_storage_scheme=scheme)
    return {k: v for k, v in out.items() if v}


class AzureStore(Store):
    atomic_create = True
    probe_once = True  # emulators and Blob-compatible services may not enforce the condition
    label = "Azure Blob endpoint"
    create_word = "create"
    condition = "If-None-Match: *"
    scope_word = "container"
    probe_advice = "Use Azure Blob Storage or ADLS Gen2 (both honour it) or Azurite"
    lists_from = True
    object_store = True

    def _list_keys_from(self, container: str, prefix: str, start_key: str) -> list[tuple[str, int, int]]:
        from fsspec.asyn import sync

        async def pages() -> list[tuple[str, int, int]]:
            client = self.fs.service_client.get_container_client(container)
            out = []
            async for b in client.walk_blobs(name_starts_with=prefix, delimiter="/", start_from=start_key):
                modified = getattr(b, "last_modified", None)  # "directories" (names ending in "/") have none
                out.append((b.name, int(getattr(b, "size", 0) or 0), int(modified.timestamp() * 1000) if modified else 0))
            return out

        return sync(self.fs.loop, pages)

    @classmethod
    def connect(cls, location: str, options: dict[str, Any]) -> AzureStore:
        kw, policy = adlfs_options(options)
        kw.setdefault("use_listings_cache", False)
        fs_class = _filesystem_class()
        for k, v in fs_class._get_kwargs_from_urls(location).items():  # abfs[s]://container@account.dfs.core.windows.net
            kw.setdefault(k, v)
        fs = fs_class(lakelog_policy=policy, **kw)
        store = cls(fs, fs_class._strip_protocol(location), _secrets(kw))
        store.policy = policy
        store.native = None if policy.explicit else arrow_options(kw)
        return store

    def endpoint(self) -> str:
        sc = self.fs.service_client
        return f"{sc.scheme}://{sc.primary_hostname}"

    native: dict[str, Any] | None = None

    def arrow_fs(self):
        # Arrow's own Azure client reads data files about twice as fast as adlfs's Python one.
        if self.native is None:
            return super().arrow_fs()
        import pyarrow.fs as pafs

        return pafs.AzureFileSystem(**self.native)

    def create(self, path: str, data: bytes) -> None:
        from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError

        try:
            self.fs.pipe_file(path, data, mode="create", retry_total=0)
        except FileExistsError as e:
            raise exists_error(path, e) from None
        except HttpResponseError as e:
            status, code = e.status_code, str(getattr(e, "error_code", "") or "")
            what = self.redact(f"{status} {code}: {e.message}".strip())
            if status == 412 or (status == 409 and code == "BlobAlreadyExists"):
                raise exists_error(path) from None  # ConditionNotMet: another writer's create won
            if status == 501 or code == "UnsupportedHeader":
                raise OSError(errno.ENOSYS, f"conditional create of {path} not supported: {what}", path) from None
            # 5xx, throttling, timeouts: the blob may or may not exist now
            raise OSError(errno.EREMOTEIO if status >= 500 or status in (408, 429) else errno.EIO,
                          f"Azure answered {what} to the conditional create of {path}", path) from None
        except (ServiceRequestError, ServiceResponseError) as e:
            # the timeout or connection failure stays the cause: Storage names it in its typed error
            raise ConnectionError(errno.ECONNRESET, f"no answer to the conditional create of {path}: {self.redact(str(e))}", path) from e
        finally:
            self.fs.invalidate_cache(path.rsplit("/", 1)[0])

    def rejects_condition(self, e: BaseException) -> bool:
        return getattr(e, "errno", None) == errno.ENOSYS
