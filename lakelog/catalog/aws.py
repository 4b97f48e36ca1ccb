"""The AWS Glue client: settings from delta-rs-style storage options and the ``AWS_*`` variables, every
call bounded and its failures as lakelog's errors.

The options are read by the S3 store's own translation (``lakelog.storage.s3.s3fs_options``: delta-rs'
names, any case, the variables where an option is not given), so a table's S3 options reach Glue too.
Glue's endpoint is the option or variable ``AWS_ENDPOINT_URL_GLUE``, else ``AWS_ENDPOINT_URL``, as
botocore resolves a service's endpoint. Requests are bounded by the storage request policy (``timeout``,
``connect_timeout``, ``max_retries``), with botocore's standard retries.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import CatalogError, CatalogUnavailableError
from ..storage.policy import unanswered

_GLUE_ENDPOINT = "aws_endpoint_url_glue"


class GlueClient:
    """boto3's Glue client and where it points (for messages)."""

    def __init__(self, client: Any, endpoint: str, policy: Any):
        self.client = client
        self.endpoint = endpoint
        self.policy = policy

    def call(self, operation: str, name: str, **kwargs: Any) -> dict:
        """``client.<operation>(**kwargs)``; raises ``GlueAnswer`` for an error Glue answered, lakelog's
        errors for an endpoint that did not answer or credentials that are missing."""
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

        try:
            return getattr(self.client, operation)(**kwargs)
        except ClientError as e:
            err = e.response.get("Error") or {}
            raise GlueAnswer(str(err.get("Code") or ""), str(err.get("Message") or e)) from e
        except (NoCredentialsError, NoRegionError) as e:
            raise CatalogError(f"AWS Glue ({name}): {e}; set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) and "
                               "AWS_REGION, as variables or storage options", catalog=name) from e
        except BotoCoreError as e:
            kind = unanswered(e)
            if kind is not None:
                what = "did not answer in time" if kind == "timeout" else "could not be reached"
                raise CatalogUnavailableError(f"AWS Glue at {self.endpoint} {what} ({operation} {name}; {self.policy.describe()})",
                                              catalog=name) from e
            raise CatalogError(f"AWS Glue at {self.endpoint}: {operation} {name} failed: {e}", catalog=name) from e


class GlueAnswer(Exception):
    """An error answer of Glue's (``code``: ``EntityNotFoundException``, ``AlreadyExistsException``...)."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def _is_aws_option(key: Any) -> bool:
    """Whether a storage option is for AWS (another store's, Azure's or GCS's, is not Glue's concern)."""
    from ..storage.policy import POLICY_KEYS
    from ..storage.s3 import _ALIASES

    if not isinstance(key, str) or key.startswith("lakelog."):
        return False
    low = key.lower()
    own = ("endpoint_url", "key", "secret", "token", "profile", "anon", "client_kwargs", "config_kwargs", "session")
    return low.startswith("aws_") or low in _ALIASES or low in POLICY_KEYS or key in own


def glue_client(options: dict[str, Any] | None, environ: Any = os.environ) -> GlueClient:
    """A Glue client for delta-rs-style (or s3fs) ``options`` and the ``AWS_*`` variables of ``environ``."""
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config

    from ..storage.s3 import s3fs_options

    opts = {k: v for k, v in (options or {}).items() if _is_aws_option(k)}
    endpoint = None
    for key in list(opts):
        if isinstance(key, str) and key.lower() == _GLUE_ENDPOINT:
            endpoint = opts.pop(key)
    kw, policy, _ = s3fs_options(opts, environ)
    client_kw = kw.get("client_kwargs") or {}
    config_kw = {k: v for k, v in (kw.get("config_kwargs") or {}).items() if k != "s3"}
    if kw.get("anon"):
        config_kw["signature_version"] = UNSIGNED
    endpoint = endpoint or environ.get("AWS_ENDPOINT_URL_GLUE") or kw.get("endpoint_url")
    session = boto3.session.Session(
        aws_access_key_id=kw.get("key"), aws_secret_access_key=kw.get("secret"), aws_session_token=kw.get("token"),
        profile_name=kw.get("profile"), region_name=client_kw.get("region_name"),
    )
    try:
        client = session.client("glue", endpoint_url=endpoint, verify=client_kw.get("verify"), config=Config(**config_kw))
    except Exception as e:  # noqa: BLE001 - botocore's configuration errors (no region...), as lakelog's
        raise CatalogError(f"AWS Glue: cannot create a client: {e}; set AWS_REGION (and credentials), as variables or "
                           "storage options") from e
    return GlueClient(client, str(endpoint or client.meta.endpoint_url), policy)
