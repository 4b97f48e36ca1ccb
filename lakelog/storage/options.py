"""Translating storage option names as delta-rs (object_store) spells them into an fsspec back end's.

Keys are matched case-insensitively, as object_store matches them (``AZURE_STORAGE_ACCOUNT_NAME`` is
``azure_storage_account_name``); the back end's own keyword names pass unchanged. The request
options (``timeout``, ``connect_timeout``, ``max_retries``: ``policy``) are taken out first. Anything
else is refused by name, so a misspelt credential never silently falls back to another one.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ..errors import InvalidArgumentError
from .policy import POLICY_KEYS, RequestPolicy, pop_policy

# Keyword arguments every fsspec filesystem takes (AbstractFileSystem and its listings cache).
FSSPEC_KEYS = ("use_listings_cache", "listings_expiry_time", "max_paths", "skip_instance_cache", "asynchronous", "loop")


def translate(options: dict[str, Any], aliases: dict[str, str], fs_class: Callable, store: str, prefix: str,
              refused: dict[str, str] | None = None) -> tuple[dict[str, Any], RequestPolicy]:
    """``options`` with each alias replaced by its back-end keyword, and the request policy; unknown
    keys, and those in ``refused`` (lower case -> why), raise InvalidArgumentError."""
    policy, options = pop_policy(options, prefix)
    own = set(FSSPEC_KEYS) | {p for p in inspect.signature(fs_class.__init__).parameters if p not in ("self", "args", "kwargs")}
    out: dict[str, Any] = {}
    unknown = []
    for key, value in options.items():
        lower = key.lower() if isinstance(key, str) else None
        if refused and lower in refused:
            raise InvalidArgumentError(f"storage option {key!r} is not supported on {store}: {refused[lower]}")
        name = aliases.get(lower) if lower is not None else None
        if name is None and key in own:
            name = key
        if name is None:
            unknown.append(key)
            continue
        if name in out and out[name] != value:
            raise InvalidArgumentError(f"storage_options give {store} setting {name!r} twice, with different values (one of them as {key!r})")
        out[name] = value
    if unknown:
        known = sorted({k for k in aliases if k.startswith(prefix)} | {prefix + k for k in POLICY_KEYS})
        raise InvalidArgumentError(
            f"unknown {store} storage option(s) {sorted(map(str, unknown))}; use delta-rs' names ({', '.join(known)}; "
            f"upper case too) or {fs_class.__module__.split('.')[0]}'s own keywords"
        )
    return out, policy


def truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on", "y")


def boolean(value: Any, key: str) -> bool:
    """A boolean storage option as object_store reads one; anything but its true and false words is refused."""
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on", "y"):
        return True
    if text in ("0", "false", "no", "off", "n", ""):
        return False
    raise InvalidArgumentError(f"storage option {key}={value!r} must be true or false")
