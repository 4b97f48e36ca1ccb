"""Collated string columns (Delta's ``collations`` writer feature): what lakelog knows about collations.

A string field's collation is recorded in the ``__COLLATIONS`` object of the field metadata of its
nearest ancestor struct field, keyed by the path from that field (``"name"`` for the field itself,
``"tags.element"`` for an array's strings); without one a string is ``spark.UTF8_BINARY``. An
identifier is ``provider.name[.version]``, provider and name case-insensitive.

Reads carry a field's ``__COLLATIONS`` object as the Arrow field metadata ``ARROW_KEY`` (JSON), and a
written Arrow field with it is written with it, so collations survive reads, writes, schema evolution
and column mapping.

What each collation means here (as Spark 4 defines them):

* ``spark.UTF8_BINARY``: byte order of the UTF-8 text (the default; what every other column gets).
* ``spark.UTF8_LCASE``: strings compare as their lower-cased forms, lower-cased code point by code point
  with the simple (one-to-one) Unicode mapping, except that U+0130 (``İ``) becomes ``i`` + U+0307 and the
  final sigma ``ς`` becomes ``σ`` (Spark's ``CollationAwareUTF8String.lowerCaseCodePoints``); the
  lower-cased forms compare in code point order. (Case mappings are those of the Unicode version
  pyarrow and DuckDB ship, which may lag behind Spark's ICU for characters added since.)
* ``icu.UNICODE`` and ``icu.<language>`` (with the default ``_CS``/``_AS`` suffixes only): ICU's
  collation for the root locale (``UNICODE``; ICU's ``en`` has no tailoring) or the language, at
  ICU's default tertiary strength, evaluated by DuckDB's ICU extension; only SQL predicates of
  row-level operations can use it.

Filters on a column under any other collation (``_CI``/``_AI``/``_RTRIM`` variants, other providers)
are refused, naming the column; so is any predicate reading a column that holds collated strings in
its arrays or maps (elements, ``array_contains``, ``m['k']``, structs in arrays) or compared as a whole
struct, other than by ``IS [NOT] NULL``: DuckDB would compare those strings in binary order. A SQL
predicate or update/merge value comparing columns of two different collations (a UTF8_LCASE column
with a UTF8_BINARY one) is refused with ``CollationMismatchError``, as Spark refuses it; a new value
compares collated columns under their collation too, and may copy one. Table expressions (CHECK
constraints, generated columns, defaults) follow Spark's collation rules in ``lakelog.spark_expressions``,
with the same UTF8_LCASE key (``lcase_sql``). Statistics: Delta's ``minValues``/``maxValues`` are in binary order, so
a writer must not give a reader a binary min/max it would use under another collation, and a reader
must not skip files by binary bounds when it compares under another collation: lakelog writes no
min/max for a collated column (``nullCount`` stays; ``statsWithCollation`` is optional and not
written) and never prunes by the min/max of one.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from .actions import AddFile
from .case_mapping import LOWER, mapped
from .errors import CollationMismatchError, UnsupportedExpressionError, UnsupportedFeatureError

METADATA_KEY = "__COLLATIONS"
ARROW_KEY = b"delta.collations"  # Arrow field metadata: the field's __COLLATIONS object (JSON)
FEATURES = ("collations", "domainMetadata")

_ICU_NAME = re.compile(r"^(UNICODE|[A-Za-z]{2,3})((?:_CS|_AS)*)$", re.IGNORECASE)
_LCASE_SPECIAL = (("\u0130", "i\u0307"),)  # İ lower-cases to two code points in Spark
_SIGMA = ("\u03c2", "\u03c3")  # ς compares as σ


@dataclass(frozen=True)
class Collation:
    """A parsed collation identifier. ``kind``: ``binary``, ``lcase``, ``icu`` (``icu_name`` is DuckDB's
    ICU collation) or ``other`` (unknown to lakelog: readable and writable, but not filterable)."""

    identifier: str
    kind: str
    icu_name: str | None = None

    @property
    def binary(self) -> bool:
        return self.kind == "binary"


BINARY = Collation("spark.UTF8_BINARY", "binary")


def parse(identifier: str) -> Collation:
    """The collation an identifier (``provider.name[.version]``) names."""
    parts = identifier.split(".", 2) if isinstance(identifier, str) else []
    if len(parts) < 2:
        return Collation(str(identifier), "other")
    provider, name = parts[0].lower(), parts[1]
    if provider == "spark" and name.upper() == "UTF8_BINARY":
        return Collation(identifier, "binary")
    if provider == "spark" and name.upper() == "UTF8_LCASE":
        return Collation(identifier, "lcase")
    m = _ICU_NAME.match(name) if provider == "icu" else None
    if m:
        base = m.group(1).lower()
        return Collation(identifier, "icu", "en" if base == "unicode" else base)
    return Collation(identifier, "other")


# ---------------------------------------------------------------- schema metadata

def arrow_metadata(delta_field: dict) -> dict[bytes, bytes] | None:
    """Arrow field metadata carrying a Delta struct field's ``__COLLATIONS`` object (None without one)."""
    meta = delta_field.get("metadata")
    value = meta.get(METADATA_KEY) if isinstance(meta, dict) else None
    if not isinstance(value, dict) or not value:
        return None
    return {ARROW_KEY: orjson.dumps(value, option=orjson.OPT_SORT_KEYS)}


def delta_metadata(field: pa.Field) -> dict:
    """The Delta field metadata an Arrow field's collations give (``{}`` without)."""
    raw = (field.metadata or {}).get(ARROW_KEY)
    if raw is None:
        return {}
    value = orjson.loads(raw)
    return {METADATA_KEY: value} if isinstance(value, dict) and value else {}


def renamed(delta_field: dict, old_name: str) -> dict:
    """A renamed Delta struct field with its ``__COLLATIONS`` keys (paths from the field) renamed too."""
    meta = delta_field.get("metadata")
    value = meta.get(METADATA_KEY) if isinstance(meta, dict) else None
    if not isinstance(value, dict):
        return delta_field
    name = delta_field["name"]
    moved = {(name + k[len(old_name):] if k == old_name or k.startswith(old_name + ".") else k): v for k, v in value.items()}
    return {**delta_field, "metadata": {**meta, METADATA_KEY: moved}}


def keep(field: pa.Field, source: pa.Field) -> pa.Field:
    """``field`` with the collations ``source`` carries (none: ``field`` unchanged)."""
    raw = (source.metadata or {}).get(ARROW_KEY)
    return field if raw is None else field.with_metadata({**(field.metadata or {}), ARROW_KEY: raw})


def of_field(field: pa.Field) -> Collation | None:
    """The collation of a string field (None: binary, or not a string)."""
    if not (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)) or field.metadata is None:
        return None
    identifier = delta_metadata(field).get(METADATA_KEY, {}).get(field.name)
    if not isinstance(identifier, str):
        return None
    c = parse(identifier)
    return None if c.binary else c


def _collated_string_paths(fields: list, mapped: bool, prefix: tuple[str, ...] = ()) -> Iterable[tuple[str, ...]]:
    for f in fields:
        if not isinstance(f, dict):
            continue
        name = f.get("name")
        meta = f.get("metadata") if isinstance(f.get("metadata"), dict) else {}
        key = meta.get("delta.columnMapping.physicalName", name) if mapped else name
        t = f.get("type")
        if t == "string":
            identifier = (meta.get(METADATA_KEY) or {}).get(name) if isinstance(meta.get(METADATA_KEY), dict) else None
            if isinstance(identifier, str) and not parse(identifier).binary:
                yield prefix + (key,)
        elif isinstance(t, dict) and t.get("type") == "struct":
            yield from _collated_string_paths(t.get("fields") or [], mapped, prefix + (key,))


def stats_paths(schema_string: str, mapped: bool) -> list[tuple[str, ...]]:
    """Stats key paths (physical names when ``mapped``) of the string columns, top-level or in structs,
    under a collation other than UTF8_BINARY. (Strings in arrays and maps get no stats.)"""
    if METADATA_KEY not in schema_string:
        return []
    return list(_collated_string_paths(orjson.loads(schema_string).get("fields") or [], mapped))


def _drop(d: Any, path: tuple[str, ...]) -> None:
    """Remove ``path`` from nested dicts, and the structs it leaves empty."""
    if not isinstance(d, dict) or path[0] not in d:
        return
    if len(path) > 1:
        _drop(d[path[0]], path[1:])
        if d[path[0]] != {}:
            return
    del d[path[0]]


def without_binary_bounds(actions: list, paths: list[tuple[str, ...]]) -> list:
    """``actions`` with the ``minValues``/``maxValues`` of the ``paths`` (see ``stats_paths``) left out of
    every add's stats: they are in binary order, which a reader comparing under the column's
    collation must not skip files by. ``nullCount`` stays."""
    if not paths:
        return actions
    out = []
    for a in actions:
        if isinstance(a, AddFile) and a.stats:
            stats = orjson.loads(a.stats)
            if isinstance(stats, dict) and any(isinstance(stats.get(k), dict) for k in ("minValues", "maxValues")):
                for k in ("minValues", "maxValues"):
                    for p in paths:
                        _drop(stats.get(k), p)
                a = dataclasses.replace(a, stats=orjson.dumps(stats).decode())
        out.append(a)
    return out


# ---------------------------------------------------------------- filters (pyarrow)

def lcase_key(x: Any) -> Any:
    """UTF8_LCASE's comparison key of a string array, scalar or ``pyarrow.compute`` expression."""
    for a, b in _LCASE_SPECIAL:
        x = pc.replace_substring(x, pattern=a, replacement=b)
    x = pc.utf8_lower(x)
    return pc.replace_substring(x, pattern=_SIGMA[0], replacement=_SIGMA[1])


def lcase_literal(value: str, t: pa.DataType) -> pa.Scalar:
    """UTF8_LCASE's key of a literal, lower-cased by the same kernel as the column."""
    return lcase_key(pa.array([value], t))[0]


def check_arrow_filterable(column: str, collation: Collation, quoted: Any) -> None:
    """Refuse a read filter on a column whose collation pyarrow cannot compare under."""
    if collation.kind != "lcase":
        raise UnsupportedFeatureError(
            f"filter {quoted!r}: column {column!r} has the collation {collation.identifier}, which read filters cannot "
            "compare under (only UTF8_BINARY and UTF8_LCASE); filter after reading, or use a SQL predicate of "
            "delete/update/merge, which compares under ICU collations"
        )


# ---------------------------------------------------------------- SQL predicates (DuckDB)

_IN = ("COMPARE_IN", "COMPARE_NOT_IN")
_NULL_TESTS = ("OPERATOR_IS_NULL", "OPERATOR_IS_NOT_NULL")


def lcase_sql(x: str) -> str:
    """DuckDB SQL of UTF8_LCASE's comparison key of the string ``x``: DuckDB's ``lower`` with Spark's
    (ICU's) mapping where they differ (``case_mapping.LOWER``: ``İ`` as ``i`` + U+0307, characters
    DuckDB's Unicode lacks), ``ς`` as ``σ``."""
    return f"replace({mapped(x, LOWER, 'lower')}, '{_SIGMA[0]}', '{_SIGMA[1]}')"


def _lcase_template(parse_sql: Callable[[str], dict]) -> dict:
    return parse_sql(lcase_sql("__lakelog_x"))


def _substitute(template: dict, operand: dict) -> dict:
    def walk(n: Any) -> Any:
        if isinstance(n, dict):
            if n.get("class") == "COLUMN_REF" and n.get("column_names") == ["__lakelog_x"]:
                return operand
            return {k: walk(v) for k, v in n.items()}
        if isinstance(n, list):
            return [walk(v) for v in n]
        return n

    return walk(copy.deepcopy(template))


# Functions whose value does not depend on their strings' collation: a collated column may be an
# argument where the function's result is a value (an update's or merge's new value), not compared.
_VALUE_FUNCTIONS = frozenset({"upper", "lower", "ucase", "lcase", "concat", "||", "substring", "substr", "left", "right", "length",
                              "repeat", "reverse", "md5", "sha256", "lpad", "rpad"})
_ONE_ARGUMENT_VALUE_FUNCTIONS = frozenset({"trim", "ltrim", "rtrim"})  # (with characters to trim they compare)


def _key(c: Collation) -> tuple[str, ...]:
    return tuple(p.lower() for p in c.identifier.split(".")[:2])


def collated_tree(tree: dict, collation_of: Callable[[tuple[str, ...]], Collation | None], parse_sql: Callable[[str], dict],
                  text: str, check_icu: Callable[[str], bool], value: bool = False) -> dict | None:
    """``tree`` (a DuckDB parse tree) with every comparison (``=``, ``<>``, ``<``..., ``IN``, ``BETWEEN``,
    ``IS [NOT] DISTINCT FROM``) that reads a collated column compared under that collation; None when
    it reads none. ``collation_of`` maps a column reference to its collation (None: not a table string
    column; a ``binary`` Collation for a table's UTF8_BINARY strings); ``check_icu`` says whether DuckDB
    has an ICU collation. A comparison of columns of two different collations raises
    ``CollationMismatchError`` (Spark's ``COLLATION_MISMATCH``). A collated column anywhere else than
    compared directly or tested for NULL (in a function, ``LIKE``) raises ``UnsupportedExpressionError``
    naming it, except, with ``value`` (``tree`` is a new value, not a predicate), where its string is the
    value: the whole expression, a CASE branch's result, a COALESCE or CAST argument, or an argument of
    a function whose value does not depend on the collation (``upper``, ``concat``, ``substring``...)."""
    used = [False]
    templates: dict[str, dict] = {}

    def raw(node: dict) -> Collation | None:
        return collation_of(tuple(node["column_names"])) if node.get("class") == "COLUMN_REF" else None

    def coll(node: dict) -> Collation | None:
        c = raw(node)
        return None if c is None or c.binary else c

    def name(node: dict) -> str:
        return ".".join(node["column_names"])

    def refuse(node: dict, why: str) -> None:
        c = coll(node)
        if c.kind == "nested":
            raise UnsupportedExpressionError(
                f"the {'value' if value else 'predicate'} {text!r} uses the column {name(node)!r}, which holds strings of the "
                f"collation {c.identifier} (in its arrays, maps or struct fields); lakelog would compare them in binary "
                "order, so it compares such a column only by IS [NOT] NULL. Compare a struct's string field directly "
                "(s.f = 'x'), or filter after reading"
            )
        raise UnsupportedExpressionError(
            f"the {'value' if value else 'predicate'} {text!r} uses the column {name(node)!r} (collation {c.identifier}) {why}; "
            "lakelog compares collated columns only directly with literals or columns of the same collation "
            "(=, <>, <, <=, >, >=, IN, BETWEEN, IS [NOT] DISTINCT FROM, IS [NOT] NULL)"
        )

    def key(node: dict, c: Collation) -> dict:
        if c.kind == "lcase":
            if "lcase" not in templates:
                templates["lcase"] = _lcase_template(parse_sql)
            return _substitute(templates["lcase"], node)
        return {"class": "COLLATE", "type": "COLLATE", "alias": "", "child": node, "collation": c.icu_name}

    def compared(operands: list[dict]) -> Collation | None:
        found = [c for c in (coll(o) for o in operands) if c is not None]
        if not found:
            return None
        first = found[0]
        for o in operands:
            c = raw(o)
            if c is not None and _key(c) != _key(first):
                ref = next(r for r in operands if coll(r) is not None)
                raise CollationMismatchError(
                    f"[COLLATION_MISMATCH.IMPLICIT] the {'value' if value else 'predicate'} {text!r} compares the column "
                    f"{name(ref)!r} (collation {first.identifier}) with the column {name(o)!r} (collation "
                    f"{'spark.UTF8_BINARY' if c.binary else c.identifier}), which Spark refuses (Spark 4.1 and later name the error "
                    f"INDETERMINATE_COLLATION_IN_EXPRESSION). To compare under {name(ref)!r}'s collation, compare it with an "
                    f"expression of the other column instead, e.g. {name(ref)} = lower({name(o)}); nothing was changed",
                    "COLLATION_MISMATCH.IMPLICIT",
                )
        if first.kind in ("other", "nested") or (first.kind == "icu" and not check_icu(first.icu_name)):
            ref = next(o for o in operands if coll(o) is not None)
            refuse(ref, "in a comparison, which lakelog cannot evaluate under that collation")
        return first

    def walk(node: Any, as_value: bool = False) -> Any:
        if isinstance(node, list):
            return [walk(v, as_value) for v in node]
        if not isinstance(node, dict):
            return node
        cls, kind = node.get("class"), node.get("type")
        if cls == "COLUMN_REF":
            if coll(node) is not None and not as_value:
                refuse(node, "in an expression (not compared directly)")
            return node
        if kind in _NULL_TESTS and node["children"] and node["children"][0].get("class") == "COLUMN_REF":
            return node
        if cls == "COMPARISON":
            c = compared([node["left"], node["right"]])
            if c is not None:
                used[0] = True
                return {**node, "left": key(walk_plain(node["left"]), c), "right": key(walk_plain(node["right"]), c)}
        elif cls == "BETWEEN":
            c = compared([node["input"], node["lower"], node["upper"]])
            if c is not None:
                used[0] = True
                return {**node, **{k: key(walk_plain(node[k]), c) for k in ("input", "lower", "upper")}}
        elif kind in _IN:
            c = compared(node["children"])
            if c is not None:
                used[0] = True
                return {**node, "children": [key(walk_plain(ch), c) for ch in node["children"]]}
        elif as_value and cls == "CASE":
            return {**node, "case_checks": [{**check, "when_expr": walk(check["when_expr"]), "then_expr": walk(check["then_expr"], True)}
                                            for check in node["case_checks"]],
                    "else_expr": walk(node["else_expr"], True)}
        elif as_value and (kind == "OPERATOR_COALESCE" or cls == "CAST"):
            return {k: walk(v, True) if k in ("children", "child") else v for k, v in node.items()}
        elif as_value and cls == "FUNCTION" and (
                node.get("function_name") in _VALUE_FUNCTIONS
                or (node.get("function_name") in _ONE_ARGUMENT_VALUE_FUNCTIONS and len(node.get("arguments") or node.get("children") or []) == 1)):
            return {k: walk(v, True) if k in ("children", "arguments") else v for k, v in node.items()}
        elif as_value and isinstance(node.get("expression"), dict) and "name" in node and cls is None:
            return {**node, "expression": walk(node["expression"], True)}  # (a function's argument)
        return {k: walk(v) for k, v in node.items()}

    def walk_plain(operand: dict) -> dict:
        # A direct collated operand is taken as it is; anything else is checked as usual.
        return operand if coll(operand) is not None else walk(operand)

    out = walk(tree, value)
    return out if used[0] else None


def _held(field: pa.Field) -> Collation | None:
    """The first collation other than UTF8_BINARY of a string in ``field`` (itself, or anywhere in its
    structs, arrays and maps), None without one."""
    raw = (field.metadata or {}).get(ARROW_KEY)
    if raw is not None:
        value = orjson.loads(raw)
        for identifier in (value.values() if isinstance(value, dict) else ()):
            if isinstance(identifier, str) and not (c := parse(identifier)).binary:
                return c
    t = field.type
    if pa.types.is_struct(t):
        children = [t.field(i) for i in range(t.num_fields)]
    elif pa.types.is_map(t):
        children = [t.key_field, t.item_field]
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        children = [t.value_field]
    else:
        children = []
    return next((c for c in map(_held, children) if c is not None), None)


def at_path(schema: pa.Schema, column: str | None, rest: tuple[str, ...] = ()) -> Collation | None:
    """The collation of ``column`` (a column of ``schema``, None for none) or of its struct field at
    the path ``rest`` (names matched ignoring case, as Delta resolves them): ``BINARY`` for a UTF8_BINARY
    string, a ``nested`` Collation for a field holding collated strings in it, None for anything else."""
    if column is None or column not in schema.names:
        return None
    field = schema.field(column)
    for part in rest:
        if not pa.types.is_struct(field.type):
            return None
        names = [field.type.field(i).name for i in range(field.type.num_fields)]
        found = part if part in names else next((n for n in names if n.lower() == part.lower()), None)
        if found is None:
            return None
        field = field.type.field(found)
    if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
        return of_field(field) or BINARY
    held = _held(field)  # compared whole or by element, it would compare in binary order
    return None if held is None else Collation(held.identifier, "nested")


def table_collations(schema: pa.Schema) -> dict[str, Collation]:
    """The top-level columns of an Arrow schema read from a table that are collated strings (not
    UTF8_BINARY) or structs, arrays or maps holding one (with the first such collation)."""
    return {f.name: c for f in schema if (c := _held(f)) is not None}
