"""S3 through s3fs: commits are conditional PUTs (``If-None-Match: *``, fsspec ``mode="create"``).

Storage options as delta-rs (object_store) names them (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``, ..., any case) become
s3fs arguments; s3fs's own keywords pass unchanged. Where an option is not given, the ``AWS_*``
environment variable of the same name is used, as delta-rs uses it (credentials only when no
credential, profile or anonymous access is given at all). Requests are bounded by ``lakelog.storage.policy``:
botocore's timeouts and its "standard" retries (``max_retries + 1`` attempts, exponential backoff with
jitter); s3fs adds no retries of its own on top. Uploads are sent without ``Expect: 100-continue``
(which botocore adds to every PUT with a body): aiohttp applies no read timeout while it waits for
the ``100 Continue``, so a PUT to an endpoint that stopped answering would wait forever.
"""

from __future__ import annotations

import errno
import os
from typing import Any

from .base import ConditionalWriteConflict, Store, _mtime_ms, class_made_on_first_use, exists_error
from .options import boolean, translate
from .policy import POLICY_KEYS, RequestPolicy

# delta-rs / object_store key names (lower case) -> s3fs keyword, or a setting handled below.
_ALIASES = {
    **dict.fromkeys(("aws_access_key_id", "access_key_id"), "key"),
    **dict.fromkeys(("aws_secret_access_key", "secret_access_key"), "secret"),
    **dict.fromkeys(("aws_session_token", "aws_token", "session_token"), "token"),
    **dict.fromkeys(("aws_region", "region"), "region"),
    **dict.fromkeys(("aws_default_region", "default_region"), "default_region"),
    **dict.fromkeys(("aws_endpoint_url", "aws_endpoint", "endpoint"), "endpoint_url"),
    **dict.fromkeys(("aws_allow_http", "allow_http"), "allow_http"),
    **dict.fromkeys(("aws_allow_invalid_certificates", "allow_invalid_certificates"), "allow_invalid_certificates"),
    **dict.fromkeys(("aws_virtual_hosted_style_request", "virtual_hosted_style_request"), "virtual_hosted_style_request"),
    "aws_s3_addressing_style": "addressing_style",
    "aws_s3_allow_unsafe_rename": "allow_unsafe_rename",
    **dict.fromkeys(("aws_profile", "profile"), "profile"),
    **dict.fromkeys(("aws_skip_signature", "skip_signature"), "skip_signature"),
    **dict.fromkeys(("aws_request_payer", "request_payer"), "request_payer"),
    **dict.fromkeys(("aws_server_side_encryption", "server_side_encryption"), "server_side_encryption"),
    **dict.fromkeys(("aws_sse_kms_key_id", "sse_kms_key_id"), "sse_kms_key_id"),
    **dict.fromkeys(("aws_proxy_url", "proxy_url"), "proxy_url"),
    **dict.fromkeys(("aws_conditional_put", "conditional_put"), "conditional_put"),
}
_LOCKING = (
    "lakelog commits with S3's conditional PUT (If-None-Match), which writers using delta-rs' DynamoDB "
    "locking provider do not check, so the two cannot write one table together. Drop the option; deltalake "
    "without AWS_S3_LOCKING_PROVIDER commits with conditional PUTs too"
)
_REFUSED = {
    **dict.fromkeys(("aws_s3_locking_provider", "delta_dynamo_table_name", "delta_dynamo_billing_mode",
                     "delta_dynamo_max_elapsed_request_time", "aws_endpoint_url_dynamodb", "aws_region_dynamodb",
                     "aws_access_key_id_dynamodb", "aws_secret_access_key_dynamodb", "aws_session_token_dynamodb"), _LOCKING),
    **dict.fromkeys(("aws_copy_if_not_exists", "copy_if_not_exists"),
                    "lakelog never copies a commit into place (it creates it with a conditional PUT); drop the option"),
}
_CREDENTIALS = ("key", "secret", "token", "profile", "skip_signature", "anon", "session")
_SSE = {"aes256": "AES256", "aws:kms": "aws:kms", "aws:kms:dsse": "aws:kms:dsse"}


def s3fs_options(options: dict[str, Any], environ: Any = os.environ) -> tuple[dict[str, Any], RequestPolicy, bool]:
    """s3fs keyword arguments for delta-rs-style (or s3fs) ``options`` and the ``AWS_*`` variables of
    ``environ``, the request policy, and whether ``AWS_S3_ALLOW_UNSAFE_RENAME`` allows commits
    without concurrency protection (lakelog's ``single_writer``)."""
    from s3fs import S3FileSystem

    from ..errors import InvalidArgumentError

    given, policy = translate(options, _ALIASES, S3FileSystem, "S3", "aws_", _REFUSED)
    env_options = {k: v for k, v in environ.items() if k.startswith("AWS_") and (k.lower() in _ALIASES or k[4:].lower() in POLICY_KEYS)}
    from_env, env_policy = translate(env_options, _ALIASES, S3FileSystem, "S3", "aws_")
    if not given.keys() & set(_CREDENTIALS):
        given = {**{k: v for k, v in from_env.items() if k in _CREDENTIALS}, **given}
    kw = {**{k: v for k, v in from_env.items() if k not in _CREDENTIALS}, **given}
    # delta-rs uses AWS_* timeouts from the environment too
    policy = policy if policy.explicit else env_policy
    config = dict(kw.pop("config_kwargs", None) or {})
    client = dict(kw.pop("client_kwargs", None) or {})
    extra = dict(kw.pop("s3_additional_kwargs", None) or {})
    region = kw.pop("region", None) or kw.pop("default_region", None)
    kw.pop("default_region", None)
    if region:
        client.setdefault("region_name", region)
    boolean(kw.pop("allow_http", "true"), "aws_allow_http")  # an http:// endpoint is used as given
    if boolean(kw.pop("allow_invalid_certificates", "false"), "aws_allow_invalid_certificates"):
        client.setdefault("verify", False)
    style = kw.pop("addressing_style", None)
    if "virtual_hosted_style_request" in kw:
        style = "virtual" if boolean(kw.pop("virtual_hosted_style_request"), "aws_virtual_hosted_style_request") else "path"
    if style is not None:
        if str(style).lower() not in ("path", "virtual"):
            raise InvalidArgumentError(f"storage option aws_s3_addressing_style={style!r} must be 'path' or 'virtual'")
        config.setdefault("s3", {}).setdefault("addressing_style", str(style).lower())
    if boolean(kw.pop("skip_signature", "false"), "aws_skip_signature"):
        kw["anon"] = True
    if boolean(kw.pop("request_payer", "false"), "aws_request_payer"):
        kw["requester_pays"] = True
    if "server_side_encryption" in kw:
        sse = str(kw.pop("server_side_encryption"))
        if sse.lower() not in _SSE:
            raise InvalidArgumentError(
                f"storage option aws_server_side_encryption={sse!r} is not supported; use one of {sorted(set(_SSE.values()))}"
            )
        extra.setdefault("ServerSideEncryption", _SSE[sse.lower()])
    if "sse_kms_key_id" in kw:
        extra.setdefault("SSEKMSKeyId", kw.pop("sse_kms_key_id"))
    if "proxy_url" in kw:
        proxy = kw.pop("proxy_url")
        config.setdefault("proxies", {"http": proxy, "https": proxy})
    conditional = kw.pop("conditional_put", "etag")
    if str(conditional).strip().lower() != "etag":
        raise InvalidArgumentError(
            f"storage option aws_conditional_put={conditional!r} is not supported: lakelog always commits with conditional "
            "PUTs; on a store without them pass lakelog.single_writer (only safe when a single process writes the table)"
        )
    unsafe = boolean(kw.pop("allow_unsafe_rename", "false"), "aws_s3_allow_unsafe_rename")
    config.setdefault("connect_timeout", policy.connect_timeout)
    config.setdefault("read_timeout", policy.timeout)
    config.setdefault("retries", {"mode": "standard", "total_max_attempts": policy.attempts})
    kw.update(config_kwargs=config, client_kwargs=client)
    if extra:
        kw["s3_additional_kwargs"] = extra
    kw.setdefault("use_listings_cache", False)
    return kw, policy, unsafe


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


@class_made_on_first_use(globals(), "PolicyS3FileSystem")
def _filesystem_class() -> type:
    """s3fs's filesystem as lakelog opens it (see the module docstring); defined on first use, when s3fs
    is imported."""
    from botocore.handlers import add_expect_header
    from s3fs import S3FileSystem

    class PolicyS3FileSystem(S3FileSystem):
        retries = 1  # botocore tries each request policy.attempts times; s3fs's own retries would multiply them

        async def set_session(self, refresh: bool = False, kwargs: dict | None = None) -> Any:
            client = await super().set_session(refresh=refresh, kwargs=kwargs or {})
            if self.__dict__.get("_without_expect") is not client:
                client.meta.events.unregister("before-call.s3", add_expect_header)
                self._without_expect = client
            return client

    return PolicyS3FileSystem


class S3Store(Store):
    atomic_create = True
    probe_once = True  # S3-compatible services may ignore or reject If-None-Match
    label = "S3 endpoint"
    create_word = "PUT"
    condition = "If-None-Match: *"
    probe_advice = "Use an S3 service that supports conditional writes (AWS S3 does since 2024)"
    lists_from = True
    object_store = True

    @classmethod
    def connect(cls, location: str, options: dict[str, Any]) -> S3Store:
        fs_class = _filesystem_class()
        kw, policy, unsafe = s3fs_options(options)
        store = cls(fs_class(**kw), fs_class._strip_protocol(location), tuple(str(kw[k]) for k in ("secret", "token") if kw.get(k)))
        store.policy, store.unsafe_commits = policy, unsafe
        return store

    def endpoint(self) -> str:
        return str(getattr(self.fs, "endpoint_url", None) or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
                   or "https://s3.amazonaws.com")

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
