"""How long a request to an object store may wait and how often it is tried, and what an endpoint that
does not answer raises.

The storage options are delta-rs' (object_store's) names, on every object store:

* ``timeout``: how long a request may wait for the endpoint's answer (each read of it), a duration as
  delta-rs writes one (``"30s"``, ``"500ms"``, ``"2m"``, ``"1h 30m"``) or a number of seconds;
  default 30 s;
* ``connect_timeout``: how long connecting may take; default 5 s;
* ``max_retries``: how many times a failed request (a timeout, a refused or dropped connection, a 5xx
  or throttling answer) is tried again, after a backoff that grows with each try; default 3.

A store's prefix may precede each (``aws_timeout``, ``azure_timeout``, ``google_timeout``), as
object_store allows. A request that got no answer on any of its ``max_retries + 1`` attempts raises
``StorageTimeoutError``; one that could not reach the endpoint at all ``StorageUnavailableError``.
object_store's retry deadline and backoff settings (``retry_timeout``, ``backoff_config.*``) are
refused by name: lakelog bounds retries by their count, with each SDK's own backoff.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError, StorageTimeoutError, StorageUnavailableError

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_CONNECT_TIMEOUT_S = 5.0
DEFAULT_MAX_RETRIES = 3

POLICY_KEYS = ("timeout", "connect_timeout", "max_retries")
_UNSUPPORTED = ("retry_timeout", "backoff_config.init_backoff", "backoff_config.max_backoff", "backoff_config.base",
                "init_backoff", "max_backoff", "backoff.init_backoff", "backoff.max_backoff", "backoff.base")

# humantime's units, as delta-rs parses durations (case matters: "M" is months, "m" minutes)
_UNITS = {
    **dict.fromkeys(("nsec", "ns"), 1e-9), **dict.fromkeys(("usec", "us", "µs"), 1e-6), **dict.fromkeys(("msec", "ms"), 1e-3),
    **dict.fromkeys(("seconds", "second", "secs", "sec", "s"), 1.0), **dict.fromkeys(("minutes", "minute", "mins", "min", "m"), 60.0),
    **dict.fromkeys(("hours", "hour", "hrs", "hr", "h"), 3600.0), **dict.fromkeys(("days", "day", "d"), 86400.0),
    **dict.fromkeys(("weeks", "week", "w"), 604800.0), **dict.fromkeys(("months", "month", "M"), 2630016.0),
    **dict.fromkeys(("years", "year", "y"), 31557600.0),
}
_PART_RE = re.compile(r"\s*(\d+)\s*([A-Za-zµ]+)")


def parse_duration(value: Any, key: str) -> float:
    """Seconds in ``value``: a duration string in humantime's form (``"30s"``, ``"1m 30s"``), or a number of seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        pos, seconds = 0, 0.0
        text = value.strip()
        while pos < len(text):
            m = _PART_RE.match(text, pos)
            if m is None or m.group(2) not in _UNITS:
                raise InvalidArgumentError(
                    f"storage option {key}={value!r} is not a duration; write it as delta-rs does, a number and a unit: "
                    "'30s', '500ms', '2m', '1h 30m'"
                )
            seconds += int(m.group(1)) * _UNITS[m.group(2)]
            pos = m.end()
        if not text:
            seconds = -1.0
    else:
        raise InvalidArgumentError(f"storage option {key} must be a duration such as '30s' (or a number of seconds), not {value!r}")
    if not seconds > 0 or seconds != seconds or seconds > 1e9:
        raise InvalidArgumentError(f"storage option {key}={value!r} must be a positive duration such as '30s'")
    return seconds


@dataclass(frozen=True)
class RequestPolicy:
    """The request timeouts (seconds) and retries of one store; ``explicit``: the caller set any of them."""

    timeout: float = DEFAULT_TIMEOUT_S
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S
    max_retries: int = DEFAULT_MAX_RETRIES
    explicit: bool = False

    @property
    def attempts(self) -> int:
        return self.max_retries + 1

    def describe(self) -> str:
        return (f"timeout {self.timeout:g}s, connect_timeout {self.connect_timeout:g}s, "
                f"{self.attempts} attempt{'s' if self.attempts > 1 else ''} (max_retries {self.max_retries})")


def pop_policy(options: dict[str, Any], prefix: str) -> tuple[RequestPolicy, dict[str, Any]]:
    """The request policy in ``options`` (keys case-insensitive, bare or with ``prefix``, e.g. ``aws_``),
    and the other options."""
    found: dict[str, tuple[str, Any]] = {}
    rest: dict[str, Any] = {}
    for key, value in options.items():
        name = key.lower() if isinstance(key, str) else key
        if isinstance(name, str) and name.startswith(prefix) and name[len(prefix):] in POLICY_KEYS + _UNSUPPORTED:
            name = name[len(prefix):]
        if name in _UNSUPPORTED:
            raise InvalidArgumentError(
                f"storage option {key!r} is not supported: lakelog bounds a request's retries by their number, with each "
                f"store's own backoff. Use max_retries (default {DEFAULT_MAX_RETRIES}) and timeout (default {DEFAULT_TIMEOUT_S:g}s)"
            )
        if name not in POLICY_KEYS:
            rest[key] = value
            continue
        if name in found and found[name][1] != value:
            raise InvalidArgumentError(f"storage options give {name!r} twice, with different values ({found[name][0]!r} and {key!r})")
        found[name] = (key, value)
    if not found:
        return RequestPolicy(), rest
    kw: dict[str, Any] = {"explicit": True}
    for name in ("timeout", "connect_timeout"):
        if name in found:
            kw[name] = parse_duration(found[name][1], found[name][0])
    if "max_retries" in found:
        key, value = found["max_retries"]
        try:
            retries = int(value) if not isinstance(value, (bool, float)) and str(value).strip() == str(value) else -1
        except (TypeError, ValueError):
            retries = -1
        if not 0 <= retries <= 100:
            raise InvalidArgumentError(f"storage option {key}={value!r} must be a whole number of retries from 0 to 100")
        kw["max_retries"] = retries
    return RequestPolicy(**kw), rest


# ---------------------------------------------------------------- endpoints that do not answer

# What Arrow's own cloud clients (Azure's SDK for C++ and libcurl behind pyarrow.fs.AzureFileSystem) say
# when the endpoint did not answer or could not be reached.
_ARROW_TIMEOUT = ("Timeout waiting for socket", "timed out", "Timeout was reached")
_ARROW_UNREACHABLE = ("Could not connect to server", "Couldn't connect to server", "Fail to get a new connection", "Failed to connect",
                      "Connection refused", "Connection reset", "Connection was closed by the server", "Could not resolve host",
                      "Failure when receiving data from the peer", "Failed sending data to the peer")


def _sdk_kinds() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """(timeout types, unreachable types) of the SDKs this process has loaded (none is imported here)."""
    timeouts: list[type] = [TimeoutError]  # asyncio's, socket's, aiohttp's ServerTimeoutError, fsspec's FSTimeoutError
    unreachable: list[type] = [ConnectionError]
    if "botocore.exceptions" in sys.modules:
        b = sys.modules["botocore.exceptions"]
        timeouts += [b.ReadTimeoutError, b.ConnectTimeoutError]
        unreachable += [b.EndpointConnectionError, b.ConnectionClosedError, b.ProxyConnectionError]
    if "azure.core.exceptions" in sys.modules:
        a = sys.modules["azure.core.exceptions"]
        timeouts += [a.ServiceRequestTimeoutError, a.ServiceResponseTimeoutError]
        unreachable += [a.ServiceRequestError, a.ServiceResponseError]
    if "aiohttp" in sys.modules:
        h = sys.modules["aiohttp"]
        unreachable += [h.ClientConnectionError]
    return tuple(timeouts), tuple(unreachable)


def unanswered(e: BaseException) -> str | None:
    """``"timeout"`` when ``e`` (or an exception it was raised from) is an endpoint not answering in time,
    ``"unreachable"`` when it could not be reached, else None."""
    timeouts, unreachable = _sdk_kinds()
    chain: list[BaseException] = []
    while e is not None and len(chain) < 8 and e not in chain:
        chain.append(e)
        e = e.__cause__ or e.__context__
    kinds = [_kind(c, timeouts, unreachable) for c in chain]
    return "timeout" if "timeout" in kinds else "unreachable" if "unreachable" in kinds else None


def _kind(e: BaseException, timeouts: tuple[type, ...], unreachable: tuple[type, ...]) -> str | None:
    if isinstance(e, StorageTimeoutError) or isinstance(e, timeouts):
        return "timeout"
    if isinstance(e, StorageUnavailableError) or isinstance(e, unreachable) and not isinstance(e, (FileNotFoundError, PermissionError)):
        return "unreachable"
    if type(e) is OSError or type(e).__module__.startswith("pyarrow"):
        text = str(e)
        if any(s in text for s in _ARROW_TIMEOUT):
            return "timeout"
        if any(s in text for s in _ARROW_UNREACHABLE):
            return "unreachable"
    return None
