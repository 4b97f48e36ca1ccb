"""Table properties (``metaData.configuration``): the ``delta.*`` keys lakelog knows, typed and validated.

The protocol stores every property as a string. ``REGISTRY`` lists the ``delta.*`` keys lakelog uses or
recognises, each with its default, the form it accepts and whether lakelog can honour a value.

* Setting properties (``validate_new``, used by ``write_table(configuration=...)``): a ``delta.*`` key is
  matched case-insensitively and stored under its canonical spelling; its value may be a Python bool or
  int where the property takes one, and is stored in the protocol's string form (``"true"``, ``"2"``).
  A value that does not parse or is out of range is an ``InvalidTablePropertyError`` naming the key, the
  value and the accepted form; an unknown ``delta.*`` key is refused the same way (as Spark refuses it);
  a value lakelog cannot honour (e.g. ``delta.randomizeFilePrefixes=true``) is an
  ``UnsupportedFeatureError``. Keys outside ``delta.`` are the user's and are stored as strings.
* Reading properties (``TableProperties``): values are parsed as Spark parses them; a missing key gives
  the default. A value another writer stored in a form that does not parse raises
  ``InvalidTablePropertyError`` when an operation needs it: writers check every property they use
  before committing (``check_writable``), readers need only ``delta.columnMapping.mode``. Nothing falls
  back to a default silently.
"""

from __future__ import annotations

import numbers
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..errors import InvalidTablePropertyError, UnsupportedFeatureError

# ---------------------------------------------------------------- intervals

_MICROS = {"microsecond": 1, "millisecond": 1_000, "second": 1_000_000, "minute": 60_000_000, "hour": 3_600_000_000}
_UNITS = ("year", "week", "day", "hour", "second", "month", "minute", "millisecond", "microsecond")
_INT64 = 2**63 - 1
_INT32 = 2**31 - 1
# What Java's Character.isWhitespace accepts among ASCII, which is what Spark's parser skips.
_WS = " \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f"
_JAVA_TRIM = "".join(chr(c) for c in range(33))  # what Java's String.trim removes
_NUMBER_RE = re.compile(r"([0-9]*)(?:\.([0-9]*))?")
INTERVAL_FORM = "a calendar interval such as 'interval 7 days', '1 week' or '168 hours' (units up to weeks; no months or years)"


@dataclass(frozen=True)
class CalendarInterval:
    months: int
    days: int
    microseconds: int


def parse_calendar_interval(text: str) -> CalendarInterval:
    """Parse an interval as Delta does: Spark's ``stringToInterval`` after prefixing ``interval``.

    Accepts ``[interval] <n> <unit> [<n> <unit> ...]`` case-insensitively, units year, month, week,
    day, hour, minute, second, millisecond, microsecond (singular or plural), signed integers, and a
    fraction (up to 9 digits, truncated to microseconds) on seconds only. Raises ValueError.
    """
    if not isinstance(text, str) or not text.strip(_JAVA_TRIM):
        raise ValueError("an interval cannot be empty")
    s = text.strip(_JAVA_TRIM).lower()
    if not s.startswith("interval "):
        s = "interval " + s
    s = s.strip(_JAVA_TRIM + "\x7f")
    if s == "interval":
        raise ValueError("an interval cannot be empty")
    if s[8] not in _WS:
        raise ValueError(f"invalid interval prefix in {text!r}")
    i, n = 9, len(s)
    months = days = micros = 0

    def fail(why: str) -> ValueError:
        return ValueError(f"{text!r} is not an interval: {why}")

    while True:
        while i < n and s[i] in _WS:
            i += 1
        if i == n:
            break
        negative, point_prefixed = False, False
        if s[i] in "+-":
            negative = s[i] == "-"
            i += 1
            while i < n and s[i] in _WS:
                i += 1
            if i == n:
                raise fail("a number must follow the sign")
        elif s[i] == ".":
            point_prefixed = True
        elif not "0" <= s[i] <= "9":
            raise fail(f"unrecognized number at {s[i:]!r}")
        m = _NUMBER_RE.match(s, i)
        digits, frac = m.group(1), m.group(2)
        if not digits and frac is None:
            raise fail(f"invalid value at {s[i:]!r}")
        i = m.end()
        if i == n:
            raise fail("a unit must follow the number")
        if s[i] not in _WS:
            raise fail(f"invalid value at {s[m.start():]!r}")
        if frac is not None and len(frac) > 9:
            raise fail("intervals support nanosecond precision at most")
        if point_prefixed and not frac:
            raise fail("invalid value '.'")
        value = int(digits or "0")
        if value > _INT64:
            raise fail("the number is too large")
        fraction_us = int((frac or "").ljust(9, "0")[:9] or "0") // 1000
        while i < n and s[i] in _WS:
            i += 1
        if i == n:
            raise fail("a unit must follow the number")
        if frac is not None and s[i] != "s":
            raise fail("only seconds can have a fractional part")
        unit = next((u for u in _UNITS if s.startswith(u, i)), None)
        if unit is None:
            raise fail(f"invalid unit at {s[i:]!r}")
        unit_start, i = i, i + len(unit)
        if i < n and s[i] == "s":
            i += 1
        if i < n and s[i] not in _WS:
            raise fail(f"invalid unit at {s[unit_start:]!r}")
        if negative:
            value, fraction_us = -value, -fraction_us
        # Overflow is checked step by step, as Spark's exact arithmetic does (int32 months and days).
        if unit in ("year", "month"):
            months = _fits(months + _fits(value * (12 if unit == "year" else 1), _INT64, text), _INT32, text)
        elif unit in ("week", "day"):
            days = _fits(days + _fits(value * (7 if unit == "week" else 1), _INT64 if unit == "week" else _INT32, text), _INT32, text)
        else:
            micros = _fits(micros + _fits(value * _MICROS[unit], _INT64, text), _INT64, text)
            if unit == "second":
                micros = _fits(micros + fraction_us, _INT64, text)
    return CalendarInterval(months, days, micros)


def _fits(v: int, bound: int, text: str) -> int:
    if not -bound - 1 <= v <= bound:
        raise ValueError(f"{text!r} is not an interval: it is too large")
    return v


def interval_ms(text: str) -> int:
    """A Delta retention interval in milliseconds: no months or years, not negative. Raises ValueError."""
    iv = parse_calendar_interval(text)
    if iv.months:
        raise ValueError(f"{text!r} uses months or years, which have no fixed length; use days (e.g. '365 days')")
    total = iv.days * 86_400_000_000 + iv.microseconds
    if total < 0:
        raise ValueError(f"{text!r} is negative")
    if total > _INT64:
        raise ValueError(f"{text!r} is too large")
    return total // 1000


# ---------------------------------------------------------------- value parsers (Spark's forms)

_INT_RE = re.compile(r"^[+-]?[0-9]+$")


def _parse_bool(s: str) -> bool:
    low = s.lower()
    if low == "true":
        return True
    if low == "false":
        return False
    raise ValueError(s)


def _int_parser(lo: int, hi: int) -> Callable[[str], int]:
    def parse(s: str) -> int:
        if not _INT_RE.match(s):
            raise ValueError(s)
        v = int(s)
        if not lo <= v <= hi:
            raise ValueError(s)
        return v

    return parse


def _enum_parser(*choices: str, case_sensitive: bool = False) -> Callable[[str], str]:
    def parse(s: str) -> str:
        for c in choices:
            if s == c or (not case_sensitive and s.lower() == c.lower()):
                return c
        raise ValueError(s)

    return parse


def _any_string(s: str) -> str:
    return s


def _formats(s: str) -> tuple[str, ...]:
    items = tuple(x for x in s.split(",")) if s else ()
    if len(set(items)) != len(items) or not set(items) <= {"iceberg", "hudi"}:
        raise ValueError(s)
    return items


# ---------------------------------------------------------------- the registry

@dataclass(frozen=True)
class Property:
    """One known table property.

    ``accepted`` describes the accepted form for error messages. ``kind`` says which Python values are
    stored in string form when set ("bool", "int"; others take strings only). ``refuse`` returns why
    lakelog cannot honour a parsed value (None when it can). ``used``: lakelog's writers act on it, so a
    value that does not parse stops writes. ``settable``: users may set it (some are internal).
    """

    key: str
    default: str | None
    parse: Callable[[str], Any]
    accepted: str
    kind: str = "string"
    used: bool = False
    settable: bool = True
    refuse: Callable[[Any], str | None] = lambda v: None


def _refuse_true(what: str) -> Callable[[Any], str | None]:
    return lambda v: f"lakelog does not implement {what}" if v else None


_BOOL = "true or false"
REGISTRY: dict[str, Property] = {
    p.key.lower(): p
    for p in [
        # used by lakelog
        Property("delta.appendOnly", "false", _parse_bool, _BOOL, "bool", used=True),
        Property("delta.checkpointInterval", "10", _int_parser(1, _INT32), "a positive integer (commits between checkpoints)", "int", used=True),
        Property("delta.deletedFileRetentionDuration", "interval 1 week", interval_ms, INTERVAL_FORM, used=True),
        Property("delta.logRetentionDuration", "interval 30 days", interval_ms, INTERVAL_FORM, used=True),
        Property("delta.enableExpiredLogCleanup", "true", _parse_bool, _BOOL, "bool", used=True),
        Property("delta.dataSkippingNumIndexedCols", "32", _int_parser(-1, _INT32), "an integer >= -1 (-1: every column)", "int", used=True),
        Property("delta.targetFileSize", None, _int_parser(1, _INT64), "a positive number of bytes", "int", used=True),
        Property(
            "delta.columnMapping.mode", "none", _enum_parser("none", "id", "name"), "none, id or name", used=True,
        ),
        Property("delta.enableInCommitTimestamps", "false", _parse_bool, _BOOL, "bool", used=True),
        Property("delta.enableDeletionVectors", "false", _parse_bool, _BOOL, "bool", used=True),
        Property("delta.checkpointPolicy", "classic", _enum_parser("classic", "v2"), "classic or v2", used=True),
        Property("delta.enableChangeDataFeed", "false", _parse_bool, _BOOL, "bool", used=True),
        Property("delta.enableChangeDataCapture", "false", _parse_bool, _BOOL, "bool", used=True),
        Property("delta.enableRowTracking", "false", _parse_bool, _BOOL, "bool", used=True),
        Property("delta.rowTrackingSuspended", "false", _parse_bool, _BOOL, "bool", used=True),
        # turn on the icebergCompatV1/V2 constraints (lakelog.table_features.iceberg_compat); at most one of them
        Property("delta.enableIcebergCompatV1", None, _parse_bool, _BOOL, "bool", used=True),
        Property("delta.enableIcebergCompatV2", None, _parse_bool, _BOOL, "bool", used=True),
        Property(
            "delta.compatibility.symlinkFormatManifest.enabled", "false", _parse_bool, _BOOL, "bool", used=True,
        ),  # lakelog.table_features.symlink_manifest writes the manifests after each commit
        # turns on the materializePartitionColumns feature (as Delta: the protocol keeps it once listed)
        Property("delta.enableMaterializePartitionColumnsFeature", None, _parse_bool, _BOOL, "bool", used=True),
        # best effort without the feature: partition columns written into data files too when true
        Property("delta.writePartitionColumnsToParquet", None, _parse_bool, _BOOL, "bool", used=True),
        # UniForm: iceberg writes Iceberg metadata after each commit (lakelog.iceberg); hudi is refused
        Property(
            "delta.universalFormat.enabledFormats", "", _formats, "a comma-separated list of iceberg, hudi", used=True,
            refuse=lambda v: "lakelog writes Iceberg metadata (UniForm) but not Hudi metadata" if "hudi" in v else None,
        ),
        # turns on the typeWidening feature; Table.alter_column_type widens only where it is true
        Property("delta.enableTypeWidening", "false", _parse_bool, _BOOL, "bool"),
        # recognised: values lakelog can honour by doing nothing
        Property("delta.checkpoint.writeStatsAsJson", "true", _parse_bool, _BOOL, "bool", refuse=lambda v: None if v else "lakelog always writes JSON stats in checkpoints"),
        Property("delta.checkpoint.writeStatsAsStruct", "false", _parse_bool, _BOOL, "bool", refuse=_refuse_true("struct stats in checkpoints")),
        Property("delta.checkpointRetentionDuration", "interval 2 days", interval_ms, INTERVAL_FORM),
        Property("delta.sampleRetentionDuration", "interval 7 days", interval_ms, INTERVAL_FORM),
        Property("delta.setTransactionRetentionDuration", None, interval_ms, INTERVAL_FORM),
        Property("delta.enableFullRetentionRollback", "true", _parse_bool, _BOOL, "bool"),
        Property("delta.isolationLevel", "Serializable", _enum_parser("Serializable", case_sensitive=True), "Serializable"),
        Property("delta.tuneFileSizesForRewrites", "false", _parse_bool, _BOOL, "bool"),
        # recognised: features lakelog does not implement (refused when turned on)
        Property("delta.randomizeFilePrefixes", "false", _parse_bool, _BOOL, "bool", refuse=_refuse_true("random file prefixes")),
        Property("delta.randomPrefixLength", "2", _int_parser(1, _INT32), "a positive integer", "int"),
        Property("delta.autoOptimize.optimizeWrite", None, _parse_bool, _BOOL, "bool", refuse=_refuse_true("optimized writes")),
        Property("delta.autoOptimize.autoCompact", None, _parse_bool, _BOOL, "bool", refuse=_refuse_true("auto compaction")),
        Property("delta.dataSkippingStatsColumns", None, _any_string, "a comma-separated list of column names", refuse=lambda v: "lakelog does not implement it (it collects stats on the first delta.dataSkippingNumIndexedCols columns)"),
        # recognised: maintained by engines, never set by users
        Property("delta.columnMapping.maxColumnId", "0", _int_parser(0, _INT64), "a non-negative integer", "int", settable=False),
        Property("delta.rowTracking.materializedRowIdColumnName", None, _any_string, "a column name", settable=False),
        Property("delta.rowTracking.materializedRowCommitVersionColumnName", None, _any_string, "a column name", settable=False),
        Property("delta.inCommitTimestampEnablementVersion", None, _int_parser(0, _INT64), "a non-negative integer", "int", settable=False),
        Property("delta.inCommitTimestampEnablementTimestamp", None, _int_parser(0, _INT64), "a non-negative integer", "int", settable=False),
        # checkpointProtection: commits and checkpoints before it are only removed together (log cleanup)
        Property("delta.requireCheckpointProtectionBeforeVersion", "0", _int_parser(0, _INT64), "a non-negative integer", "int", used=True, settable=False),
        Property("delta.minReaderVersion", None, _int_parser(1, 3), "1, 2 or 3", "int", settable=False),
        Property("delta.minWriterVersion", None, _int_parser(1, 7), "1 to 7", "int", settable=False),
    ]
}

_NOT_SETTABLE_PREFIXES = {
    "delta.constraints.": "CHECK constraints, which Table.add_constraint adds (after checking the table's rows)",
    "delta.feature.": "table features, which lakelog enables itself when a table needs them",
}


def _error(key: str, value: Any, prop: Property, why: str = "") -> InvalidTablePropertyError:
    return InvalidTablePropertyError(
        f"table property {key}={value!r} is invalid{': ' + why if why else ''}; it takes {prop.accepted}",
        key=key,
        value=value,
    )


def _as_string(key: str, value: Any, prop: Property | None) -> str:
    """The protocol's string form of a value being set (Python bools and ints where the property takes one)."""
    if isinstance(value, str):
        return value
    if prop is None:  # a user key: scalars become their usual text
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return str(value)
        raise InvalidTablePropertyError(
            f"table property {key!r} has a value of type {type(value).__name__}; property values are strings", key=key, value=value
        )
    if isinstance(value, bool) and prop.kind == "bool":
        return "true" if value else "false"
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and prop.kind == "int":
        return str(int(value))
    raise _error(prop.key, value, prop, f"a {type(value).__name__} is not accepted")


def validate_new(configuration: Mapping[str, Any] | None) -> dict[str, str]:
    """Validate properties being set; return them with canonical keys and string values (see module doc)."""
    if configuration is not None and not isinstance(configuration, Mapping):
        raise InvalidTablePropertyError(f"configuration must be a dict of table properties, not {type(configuration).__name__}")
    out: dict[str, str] = {}
    for key, value in (configuration or {}).items():
        if not isinstance(key, str) or not key:
            raise InvalidTablePropertyError(f"table property names are non-empty strings, not {key!r}", key=key, value=value)
        low = key.lower()
        if not low.startswith("delta."):
            out[key] = _as_string(key, value, None)
            continue
        for prefix, what in _NOT_SETTABLE_PREFIXES.items():
            if low.startswith(prefix):
                raise UnsupportedFeatureError(f"table property {key!r} sets {what}; remove it from the configuration")
        prop = REGISTRY.get(low)
        if prop is None:
            raise InvalidTablePropertyError(
                f"unknown table property {key!r}: delta.* properties must be ones Delta defines "
                f"(lakelog knows {', '.join(sorted(p.key for p in REGISTRY.values() if p.settable))}); "
                "use a key outside the delta. namespace for your own properties",
                key=key,
                value=value,
            )
        if not prop.settable:
            raise InvalidTablePropertyError(f"table property {prop.key} is maintained by the engine and cannot be set", key=prop.key, value=value)
        text = _as_string(prop.key, value, prop)
        try:
            parsed = prop.parse(text)
        except ValueError as e:
            why = str(e) if prop.parse is interval_ms else ""
            raise _error(prop.key, value, prop, why) from None
        reason = prop.refuse(parsed)
        if reason:
            raise UnsupportedFeatureError(f"table property {prop.key}={text!r}: {reason}; leave it out, or write the table with an engine that does")
        if prop.kind == "bool":
            text = "true" if parsed else "false"
        elif prop.kind == "int":
            text = str(parsed)
        elif isinstance(parsed, str):
            text = parsed  # the canonical spelling of an enum
        out[prop.key] = text
    return out


class TableProperties:
    """Typed access to a table's properties (a ``metaData.configuration``)."""

    __slots__ = ("configuration",)

    def __init__(self, configuration: Mapping[str, str] | None):
        self.configuration = dict(configuration or {})

    def get(self, key: str) -> Any:
        """The parsed value of a known property (its default when absent; None when it has none)."""
        prop = REGISTRY[key.lower()]
        raw = self.configuration.get(prop.key)
        if raw is None:
            return None if prop.default is None else prop.parse(prop.default)
        try:
            return prop.parse(raw)
        except (ValueError, TypeError) as e:
            why = str(e) if prop.parse is interval_ms else ""
            raise InvalidTablePropertyError(
                f"the table's property {prop.key}={raw!r} does not parse{': ' + why if why else ''} (it takes {prop.accepted}); "
                f"lakelog will not guess. Fix it with write_table(..., configuration={{{prop.key!r}: ...}}) or the engine that set it",
                key=prop.key,
                value=raw,
            ) from None

    def check_writable(self) -> None:
        """Raise InvalidTablePropertyError if a property lakelog's writers use does not parse."""
        for prop in REGISTRY.values():
            if prop.used:
                self.get(prop.key)

    def features_in_use(self) -> list[str]:
        """Features turned on by properties that lakelog's writers cannot honour (empty when none)."""
        out = []
        if "hudi" in self.get("delta.universalFormat.enabledFormats"):
            out.append("Hudi metadata (UniForm)")
        return out

    @property
    def append_only(self) -> bool:
        return self.get("delta.appendOnly")

    @property
    def checkpoint_policy(self) -> str:
        """``classic`` or ``v2`` (V2 checkpoints with sidecars; needs the ``v2Checkpoint`` feature)."""
        return self.get("delta.checkpointPolicy")

    @property
    def in_commit_timestamps(self) -> bool:
        return self.get("delta.enableInCommitTimestamps")

    @property
    def ict_enablement(self) -> tuple[int, int] | None:
        """(version, timestamp) from which in-commit timestamps are the commit times; None when the
        properties are absent (then every version has one if the feature is on)."""
        v = self.get("delta.inCommitTimestampEnablementVersion")
        t = self.get("delta.inCommitTimestampEnablementTimestamp")
        return None if v is None or t is None else (v, t)

    @property
    def checkpoint_interval(self) -> int:
        return self.get("delta.checkpointInterval")

    @property
    def deleted_file_retention_ms(self) -> int:
        return self.get("delta.deletedFileRetentionDuration")

    @property
    def log_retention_ms(self) -> int:
        return self.get("delta.logRetentionDuration")

    @property
    def expired_log_cleanup(self) -> bool:
        return self.get("delta.enableExpiredLogCleanup")

    @property
    def num_indexed_cols(self) -> int:
        return self.get("delta.dataSkippingNumIndexedCols")

    @property
    def target_file_size(self) -> int | None:
        return self.get("delta.targetFileSize")

    @property
    def column_mapping_mode(self) -> str:
        return self.get("delta.columnMapping.mode")

    @property
    def change_data_feed(self) -> bool:
        # The legacy key counts too, as in Spark.
        return bool(self.get("delta.enableChangeDataFeed") or self.get("delta.enableChangeDataCapture"))


DEFAULT_LOG_RETENTION_MS = interval_ms(REGISTRY["delta.logretentionduration"].default)
