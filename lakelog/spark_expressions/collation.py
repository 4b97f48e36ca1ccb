"""Collated strings (Spark 4's ``STRING COLLATE ...``): which collation an operation on strings uses, and
comparisons and searches under ``UTF8_LCASE``.

A table column's strings have the collation its ``__COLLATIONS`` gives (``types.of_field``), with an
*implicit* strength; a string literal, and a string a function makes anew (``md5``, ``chr``, a CAST from
another type), has the *default* collation (UTF8_BINARY); ``x COLLATE c`` is *explicit*. An operation
on several strings (a comparison, IN, CASE, COALESCE, ``concat``, ``contains``...) takes the collation
of its strongest operand, as Spark's collation coercion does: two different explicit collations are an
error (``COLLATION_MISMATCH.EXPLICIT``); two different implicit ones make the result's collation
indeterminate, an error where it decides a comparison or search (``COLLATION_MISMATCH.IMPLICIT``, which
Spark 4.1 and later name ``INDETERMINATE_COLLATION_IN_EXPRESSION``). A function that changes a string
(``upper``, ``substring``, ``concat``...) keeps its collation.

Under ``UTF8_LCASE`` strings compare as their lower-cased forms (Spark's ``lowerCaseCodePoints``: each
code point lower-cased with ICU's simple mapping, ``İ`` as ``i`` + U+0307, ``ς`` as ``σ``), in code point
order; ``contains``, ``startswith``, ``endswith``, ``instr`` and ``locate`` search the lower-cased forms
too. Other collations (ICU's) are refused by name in any operation that depends on them, as are
``replace``, ``LIKE`` and ``TRIM`` with characters under ``UTF8_LCASE``."""

from __future__ import annotations

from sqlglot import exp

from ..collations import lcase_sql
from ..errors import CollationMismatchError
from . import types as T
from .catalog import NODES, Sql, entry, raise_sql
from .types import BINARY_COLLATION, DEFAULT, EXPLICIT, IMPLICIT, INDETERMINATE, SparkType

LCASE = "UTF8_LCASE"
_NAMES = {BINARY_COLLATION.lower(): BINARY_COLLATION, LCASE.lower(): LCASE}  # the collations COLLATE takes here
_DOTTED_I = "\u0130"  # İ: lower-cases to two code points, so a match may end or start inside it
_COMBINING_DOT = "\u0307"


def resolve(tr, items: list[Sql], context: str, sensitive: bool = False) -> SparkType:
    """The string type (collation and strength) Spark's collation coercion gives the string operands among
    ``items`` of ``context``; ``sensitive``: the operation compares or searches, so an indeterminate
    collation is an error."""
    strings = [s.type for s in items if s.type.name == "string"]
    explicit = sorted({t.collation for t in strings if t.strength == EXPLICIT})
    if len(explicit) > 1:
        raise CollationMismatchError(
            f"[COLLATION_MISMATCH.EXPLICIT] the {tr.what} ({tr.text}) gives {context} the explicit collations "
            f"{' and '.join(explicit)}; Spark refuses it too. Keep one COLLATE clause; nothing was written",
            "COLLATION_MISMATCH.EXPLICIT",
        )
    if explicit:
        return T.string(explicit[0], EXPLICIT)
    implicit = sorted({t.collation for t in strings if t.strength == IMPLICIT})
    if len(implicit) > 1 or INDETERMINATE in implicit:
        if sensitive:
            known = [c for c in implicit if c != INDETERMINATE]
            mixed = f"the collations {' and '.join(known)}" if len(known) > 1 else "different collations (mixed in an operand)"
            raise CollationMismatchError(
                f"[COLLATION_MISMATCH.IMPLICIT] the {tr.what} ({tr.text}) compares strings of {mixed} in "
                f"{context}; Spark refuses it too (Spark 4.1 and later name the error INDETERMINATE_COLLATION_IN_EXPRESSION). "
                "Say which collation to compare under with COLLATE, e.g. x COLLATE UTF8_BINARY = y; nothing was written",
                "COLLATION_MISMATCH.IMPLICIT",
            )
        return T.string(INDETERMINATE, IMPLICIT)
    if implicit:
        return T.string(implicit[0], IMPLICIT)
    return T.string(BINARY_COLLATION, DEFAULT)


def coerce(tr, items: list[Sql], context: str, sensitive: bool = False) -> tuple[list[Sql], SparkType]:
    """``items`` (strings among them) with the collation ``resolve`` gives them, and that string type."""
    t = resolve(tr, items, context, sensitive)
    return [Sql(s.text, t, s.fails, s.value, s.literal) if s.type.name == "string" else s for s in items], t


def searches_lcase(tr, t: SparkType, context: str) -> bool:
    """Whether ``context`` compares strings of type ``t`` under UTF8_LCASE (False: UTF8_BINARY); other
    collations are refused."""
    if t.collation == BINARY_COLLATION:
        return False
    if t.collation != LCASE:
        tr.refuse(f"{context} under the collation {t.collation}",
                  "lakelog compares strings in table expressions under UTF8_BINARY and UTF8_LCASE only")
    return True


def keys(tr, items: list[Sql], t: SparkType, context: str) -> list[Sql]:
    """``items`` (of the string type ``t``) as what compares under ``t``'s collation as they do: their
    UTF8_LCASE keys, or themselves under UTF8_BINARY."""
    if not searches_lcase(tr, t, context):
        return items
    return [Sql(lcase_sql(s.text), s.type, s.fails, s.value, s.literal) for s in items]


def refuse_collated(tr, t: SparkType, what: str, why: str) -> None:
    """Refuse ``what`` (a search lakelog evaluates in binary only) on strings of a collation other than UTF8_BINARY."""
    if t.collated:
        tr.refuse(f"{what} under the collation {t.collation}", why)


def dotted_i_guard(s: str, splits: str, value: str) -> str:
    """``value`` (a search in UTF8_LCASE keys), or an [UNSUPPORTED] error for the rows where the string
    ``s`` holds ``İ`` and ``splits`` (SQL, true where a match in the keys could begin or end inside the
    two code points ``İ`` lower-cases to, which Spark never matches) holds: the keys' positions are not
    Spark's there."""
    unsupported = raise_sql("UNSUPPORTED", "lakelog does not search under UTF8_LCASE in a string holding İ (U+0130) there")
    return f"(CASE WHEN contains({s}, '{_DOTTED_I}') AND ({splits}) THEN {unsupported} ELSE {value} END)"


def starts_inside(key: str) -> str:
    """SQL: a pattern key that begins with the combining dot of an ``İ``'s key."""
    return f"starts_with({key}, '{_COMBINING_DOT}')"


def ends_inside(key: str) -> str:
    """SQL: a pattern key that ends with the ``i`` of an ``İ``'s key."""
    return f"ends_with({key}, 'i')"


def _collate(tr, n: exp.Collate) -> Sql:
    value = tr.node(n.this)
    name = n.expression.name if isinstance(n.expression, (exp.Var, exp.Column, exp.Identifier, exp.Literal)) else ""
    if not (value.type.name == "string" or value.type.void):
        tr.invalid(f"COLLATE takes a string, not {value.type}")
    collation = _NAMES.get(name.lower())
    if collation is None:
        tr.refuse(f"the collation {name or n.expression.sql('spark')}", "lakelog evaluates UTF8_BINARY and UTF8_LCASE")
    t = T.string(collation, EXPLICIT)
    if value.type.void:
        return Sql("CAST(NULL AS VARCHAR)", t, value=None)
    return Sql(value.text, t, value.fails, value.value, value.literal)


NODES[exp.Collate] = _collate
entry("COLLATE", "operator",
      "`s COLLATE UTF8_BINARY` / `UTF8_LCASE`: the collation s compares under (explicit, so it wins over a column's). "
      "Strings of a table column have the column's collation (`__COLLATIONS`), literals and new strings UTF8_BINARY; "
      "a comparison, IN, CASE, COALESCE or string function takes its strongest operand's (two different columns' "
      "collations in a comparison or search are an error, COLLATION_MISMATCH, as in Spark); under UTF8_LCASE strings "
      "compare as their lower-cased forms (İ as i + U+0307, ς as σ)")

__all__ = ["resolve", "coerce", "keys", "searches_lcase", "lcase_sql", "refuse_collated", "dotted_i_guard", "starts_inside",
           "ends_inside", "LCASE"]
