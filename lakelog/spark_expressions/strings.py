"""Spark's string functions. Positions and lengths count characters (Unicode code points), as Spark's
``UTF8String`` does; arguments that are not strings are cast to strings as Spark casts them implicitly
(integers, decimals, dates, timestamps, booleans; a float or double is refused, see ``casts``). A
function that changes a string keeps its collation; searches (``contains``, ``instr``...) search under
it (``collation``)."""

from __future__ import annotations

from sqlglot import exp

from . import types as T
from ..case_mapping import LOWER, UPPER, mapped
from .catalog import NODES, Sql, entry, function, raise_sql
from .collation import coerce, dotted_i_guard, ends_inside, lcase_sql, refuse_collated, searches_lcase, starts_inside
from .translate import Translator

_INT_TYPES = ("tinyint", "smallint", "int")


def string_arg(tr: Translator, s: Sql, name: str) -> Sql:
    """``s`` as a string argument of ``name``: cast to a string as Spark casts it implicitly."""
    if s.type.name == "string":
        return s
    if s.type.void or s.type.atomic and s.type.name != "binary":
        return tr.cast(s, T.STRING, name)
    tr.refuse(f"{name}() of {s.type}")


def int_arg(tr: Translator, s: Sql, name: str) -> Sql:
    """An int argument (a bigint is cast down, an error where it does not fit, as Spark's implicit cast)."""
    if s.type.void or s.type.name in _INT_TYPES + ("bigint",):
        return tr.cast(s, T.INT, name)
    if s.type.name == "string":
        tr.refuse(f"{name}() with a string count", "write the CAST you mean")
    tr.invalid(f"{name}() takes an integer, not {s.type}")


# ---------------------------------------------------------------- length and case

@function(("length", "char_length", "character_length", "len"), "string", "characters (code points), int")
def length(tr, args, name):
    (s,) = tr.args(args, name, 1)
    s = string_arg(tr, s, name)
    return Sql(f"CAST(length({s.text}) AS INTEGER)", T.INT, s.fails)


@function("octet_length", "string", "UTF-8 bytes, int")
def octet_length(tr, args, name):
    (s,) = tr.args(args, name, 1)
    s = string_arg(tr, s, name)
    return Sql(f"CAST(strlen({s.text}) AS INTEGER)", T.INT, s.fails)


@function("bit_length", "string", "UTF-8 bytes times 8, int")
def bit_length(tr, args, name):
    (s,) = tr.args(args, name, 1)
    s = string_arg(tr, s, name)
    return Sql(f"CAST(strlen({s.text}) * 8 AS INTEGER)", T.INT, s.fails)


@function(("upper", "ucase"), "string", "Spark's (ICU's) full case mapping: DuckDB's upper, with Spark's result for the "
          "characters where they differ (case_mapping.UPPER: ß is SS, ...)")
def upper(tr, args, name):
    (s,) = tr.args(args, name, 1)
    s = string_arg(tr, s, name)
    return Sql(mapped(s.text, UPPER, "upper"), s.type, s.fails)


@function(("lower", "lcase"), "string", "as upper (case_mapping.LOWER: İ is i + U+0307, ...); a string holding Σ (GREEK CAPITAL "
          "LETTER SIGMA, whose lower case depends on its neighbours in Spark) is an error")
def lower(tr, args, name):
    (s,) = tr.args(args, name, 1)
    s = string_arg(tr, s, name)
    body = mapped(s.text, LOWER, "lower")
    sigma = f"contains({s.text}, '\u03a3')"
    text = f"(CASE WHEN {sigma} THEN {raise_sql('UNSUPPORTED', 'lakelog does not lower-case Σ (Spark applies the final-sigma rule)')} ELSE {body} END)"
    return Sql(text, s.type, True)


# ---------------------------------------------------------------- trimming

def _trim(tr, s: Sql, chars: Sql | None, where: str, name: str) -> Sql:
    s = string_arg(tr, s, name)
    fn = {"BOTH": "trim", "LEADING": "ltrim", "TRAILING": "rtrim"}[where]
    if chars is None:
        return Sql(f"{fn}({s.text}, ' ')", s.type, s.fails)  # Spark trims spaces only, not tabs or newlines
    (s, chars), t = coerce(tr, [s, string_arg(tr, chars, name)], f"{name}()", sensitive=True)
    refuse_collated(tr, t, f"{name}() of characters", "Spark compares each character with the trimmed characters lower-cased")
    return tr.null_skip([s, chars], lambda a, b: f"{fn}({a}, {b})", t)


def trim_node(tr, n: exp.Trim) -> Sql:
    where = (n.args.get("position") or "BOTH").upper()
    if n.args.get("collation"):
        tr.refuse("TRIM with a collation")
    chars = tr.node(n.expression) if n.expression is not None else None
    return _trim(tr, tr.node(n.this), chars, where, "trim")


@function(("trim", "ltrim", "rtrim", "btrim"), "string",
          "spaces (only U+0020) from both ends / the start / the end; TRIM([BOTH|LEADING|TRAILING] chars FROM s) and btrim(s, chars) "
          "remove any of the characters in chars (refused under UTF8_LCASE)")
def trim_function(tr, args, name):
    where = {"ltrim": "LEADING", "rtrim": "TRAILING"}.get(name, "BOTH")
    if name == "btrim":
        s, *chars = tr.args(args, name, 1, 2)
        return _trim(tr, s, chars[0] if chars else None, where, name)
    (s,) = tr.args(args, name, 1)
    return _trim(tr, s, None, where, name)


# ---------------------------------------------------------------- substrings and positions

def substring_sql(s: str, pos: str, length: str | None) -> str:
    """Spark's ``UTF8String.substringSQL``: 1-based ``pos``, 0 as 1, negative from the end; ``length`` may run
    past either end (computed in BIGINT, so nothing overflows)."""
    n = f"length({s})"
    start0 = f"(CASE WHEN {pos} > 0 THEN CAST({pos} AS BIGINT) - 1 WHEN {pos} < 0 THEN {n} + {pos} ELSE 0 END)"
    end = f"({start0} + CAST({length if length is not None else 2147483647} AS BIGINT))"  # Spark's default length: Integer.MAX_VALUE
    start = f"greatest({start0}, 0)"
    return f"(CASE WHEN {start} >= {end} THEN '' ELSE substring({s}, {start} + 1, least({end}, {n}) - {start}) END)"


def _substring(tr, s: Sql, pos: Sql, length: Sql | None, name: str) -> Sql:
    s, pos = string_arg(tr, s, name), int_arg(tr, pos, name)
    if length is None:
        return tr.null_skip([s, pos], lambda a, b: substring_sql(a, b, None), s.type, propagates=False)
    length = int_arg(tr, length, name)
    return tr.null_skip([s, pos, length], substring_sql, s.type, propagates=False)


def substring_node(tr, n: exp.Substring) -> Sql:
    length = n.args.get("length")
    return _substring(tr, tr.node(n.this), tr.node(n.args["start"]), tr.node(length) if length is not None else None, "substring")


@function(("substring", "substr"), "string",
          "substring(s, pos[, len]): 1-based, pos 0 counts as 1, a negative pos counts from the end; also SUBSTRING(s FROM pos FOR len)")
def substring(tr, args, name):
    s, pos, *length = tr.args(args, name, 2, 3)
    return _substring(tr, s, pos, length[0] if length else None, name)


@function("left", "string", "the first n characters ('' for n <= 0)")
def left(tr, args, name):
    s, n = tr.args(args, name, 2)
    return _substring(tr, s, Sql("CAST(1 AS INTEGER)", T.INT, value=1, literal=True), n, name)


@function("right", "string", "the last n characters ('' for n <= 0)")
def right(tr, args, name):
    s, n = tr.args(args, name, 2)
    s, n = string_arg(tr, s, name), int_arg(tr, n, name)
    # Spark: if (n <= 0) '' else substring(s, -n)
    body = lambda a, b: f"(CASE WHEN {b} <= 0 THEN '' ELSE {substring_sql(a, f'(-{b})', None)} END)"  # noqa: E731
    return tr.null_skip([s, n], body, s.type, propagates=False)


def _locate(tr, sub: Sql, s: Sql, pos: Sql | None, name: str) -> Sql:
    (sub, s), t = coerce(tr, [string_arg(tr, sub, name), string_arg(tr, s, name)], f"{name}()", sensitive=True)
    lcase = searches_lcase(tr, t, f"{name}()")
    key = lcase_sql if lcase else (lambda x: x)

    def first(x: str, y: str) -> str:
        # (under UTF8_LCASE a key's position is the string's where no İ precedes it)
        found = f"instr({key(x)}, {key(y)})"
        return dotted_i_guard(x, f"{found} > 0", found) if lcase else found

    if pos is None:
        return tr.null_skip([s, sub], lambda a, b: f"CAST({first(a, b)} AS INTEGER)", T.INT, fails=lcase)
    pos = int_arg(tr, pos, name)
    # Spark's StringLocate: a NULL start gives 0; a start below 1 gives 0; else the first match at or after start
    found = first(f"substring({s.text}, {pos.text})", sub.text)
    text = (f"(CASE WHEN {pos.text} IS NULL THEN 0 WHEN {sub.text} IS NULL OR {s.text} IS NULL THEN NULL "
            f"WHEN {pos.text} < 1 THEN 0 WHEN {sub.text} = '' THEN 1 WHEN {found} = 0 THEN 0 "
            f"ELSE CAST({found} + {pos.text} - 1 AS INTEGER) END)")
    return Sql(text, T.INT, sub.fails or s.fails or pos.fails or lcase)


@function("instr", "string", "instr(s, sub): the 1-based position of the first sub in s, 0 when absent (1 for ''); under UTF8_LCASE "
          "of the first match of the lower-cased forms (a match after an İ is refused)")
def instr(tr, args, name):
    s, sub = tr.args(args, name, 2)
    return _locate(tr, sub, s, None, name)


@function(("locate", "position"), "string",
          "locate(sub, s[, start]): as instr, from start; 0 where start < 1 or start is NULL; also POSITION(sub IN s)")
def locate(tr, args, name):
    sub, s, *pos = tr.args(args, name, 2, 3)
    return _locate(tr, sub, s, pos[0] if pos else None, name)


def position_node(tr, n: exp.StrPosition) -> Sql:
    pos = n.args.get("position")
    return _locate(tr, tr.node(n.args["substr"]), tr.node(n.this), tr.node(pos) if pos is not None else None, "position")


# ---------------------------------------------------------------- building strings

def _concat(tr, parts: list[Sql], name: str) -> Sql:
    if not parts:
        return Sql("''", T.STRING, value="")
    parts, t = coerce(tr, [string_arg(tr, p, name) for p in parts], f"{name}()")
    return Sql("(" + " || ".join(p.text for p in parts) + ")", t, any(p.fails for p in parts))


@function("concat", "string", "NULL when any argument is NULL; non-string arguments cast to strings")
def concat(tr, args, name):
    return _concat(tr, [tr.node(a) for a in args], name)


def dpipe(tr, n: exp.DPipe) -> Sql:
    return _concat(tr, [tr.node(n.this), tr.node(n.expression)], "||")


entry("||", "string", "concat(a, b)")


@function("concat_ws", "string", "concat_ws(sep, s...): the non-NULL strings joined by sep; NULL when sep is NULL "
          "(array arguments are refused)")
def concat_ws(tr, args, name):
    if not args:
        tr.invalid("concat_ws() needs a separator")
    (sep, *parts), t = coerce(tr, [string_arg(tr, tr.node(a), name) for a in args], f"{name}()")
    if not parts:
        return Sql(f"(CASE WHEN {sep.text} IS NULL THEN NULL ELSE '' END)", t, sep.fails)
    return Sql(f"concat_ws({sep.text}, {', '.join(p.text for p in parts)})", t, sep.fails or any(p.fails for p in parts))


def _pad(tr, args, name, left: bool) -> Sql:
    s, n, *pad = tr.args(args, name, 2, 3)
    s, n = string_arg(tr, s, name), int_arg(tr, n, name)
    pad = string_arg(tr, pad[0], name) if pad else Sql("' '", T.STRING, value=" ")
    (s, pad), t = coerce(tr, [s, pad], f"{name}()")
    fn = "lpad" if left else "rpad"
    # Spark: no padding to do (or nothing to pad with): the first n characters
    body = lambda a, b, c: (f"(CASE WHEN {b} - length({a}) <= 0 OR {c} = '' THEN substring({a}, 1, greatest({b}, 0)) "  # noqa: E731
                            f"ELSE {fn}({a}, {b}, {c}) END)")
    return tr.null_skip([s, n, pad], body, t, propagates=False)


@function("lpad", "string", "lpad(s, n[, pad]): s cut or padded on the left to n characters with pad repeated (default ' '); "
          "an empty pad leaves s (cut to n)")
def lpad(tr, args, name):
    return _pad(tr, args, name, True)


@function("rpad", "string", "as lpad, on the right")
def rpad(tr, args, name):
    return _pad(tr, args, name, False)


@function("replace", "string", "replace(s, search[, replacement]): every search replaced (default ''); an empty search leaves s; refused under "
          "UTF8_LCASE")
def replace(tr, args, name):
    s, search, *rep = tr.args(args, name, 2, 3)
    parts = [string_arg(tr, s, name), string_arg(tr, search, name)]
    parts.append(string_arg(tr, rep[0], name) if rep else Sql("''", T.STRING, value=""))
    parts, t = coerce(tr, parts, f"{name}()", sensitive=True)
    refuse_collated(tr, t, f"{name}()", "Spark finds the occurrences case-insensitively and keeps the rest of the string as it is")
    return tr.null_skip(parts, lambda a, b, c: f"replace({a}, {b}, {c})", t)


@function("repeat", "string", "repeat(s, n): '' for n <= 0")
def repeat(tr, args, name):
    s, n = tr.args(args, name, 2)
    s, n = string_arg(tr, s, name), int_arg(tr, n, name)
    return tr.null_skip([s, n], lambda a, b: f"repeat({a}, greatest({b}, 0))", s.type, propagates=False)


def _predicate(duck: str, splits):
    def handler(tr, args, name):
        s, sub = tr.args(args, name, 2)
        (s, sub), t = coerce(tr, [string_arg(tr, s, name), string_arg(tr, sub, name)], f"{name}()", sensitive=True)
        if not searches_lcase(tr, t, f"{name}()"):
            return tr.null_skip([s, sub], lambda a, b: f"{duck}({a}, {b})", T.BOOLEAN)
        # (a match of the keys that begins or ends inside an İ's two code points is none in Spark)
        def body(a: str, b: str) -> str:
            found = f"{duck}({lcase_sql(a)}, {lcase_sql(b)})"
            return dotted_i_guard(a, f"{found} AND ({splits(lcase_sql(b))})", found)

        return tr.null_skip([s, sub], body, T.BOOLEAN, fails=True)

    return handler


_SEARCH_NOTE = "; under UTF8_LCASE the lower-cased forms are searched (a string holding İ where a match could split it is refused)"
function("startswith", "string", "TRUE for an empty prefix" + _SEARCH_NOTE)(_predicate("starts_with", ends_inside))
function("endswith", "string", "TRUE for an empty suffix" + _SEARCH_NOTE)(_predicate("ends_with", starts_inside))
function("contains", "string", "TRUE for an empty string" + _SEARCH_NOTE)(
    _predicate("contains", lambda key: f"{starts_inside(key)} OR {ends_inside(key)}"))


@function("ascii", "string", "the code point of the first character, 0 for ''")
def ascii_(tr, args, name):
    (s,) = tr.args(args, name, 1)
    s = string_arg(tr, s, name)
    return Sql(f"CAST(ascii({s.text}) AS INTEGER)", T.INT, s.fails)


@function(("chr", "char"), "string", "chr(n): '' for n < 0, else the character n mod 256 (U+0000 for 0)")
def chr_(tr, args, name):
    (n,) = tr.args(args, name, 1)
    return _chr(tr, n, name)


def chr_node(tr, node: exp.Chr) -> Sql:
    if node.args.get("charset") or len(node.expressions) != 1:
        tr.refuse("chr() with a character set")
    return _chr(tr, tr.node(node.expressions[0]), "chr")


def _chr(tr, n: Sql, name: str) -> Sql:
    if not (n.type.integral or n.type.void):
        tr.refuse(f"{name}() of {n.type}")
    n = tr.cast(n, T.LONG)
    return Sql(f"(CASE WHEN {n.text} < 0 THEN '' ELSE chr(CAST({n.text} & 255 AS INTEGER)) END)", T.STRING, n.fails)


# ---------------------------------------------------------------- hashes

def _hash(duck: str):
    def handler(tr, args, name):
        (s,) = tr.args(args, name, 1)
        if s.type.name != "binary":
            s = string_arg(tr, s, name)
        return Sql(f"{duck}({s.text})", T.STRING, s.fails)

    return handler


function("md5", "hash", "lower-case hex of the MD5 of the UTF-8 bytes (or of a binary)")(_hash("md5"))
function(("sha1", "sha"), "hash", "lower-case hex SHA-1")(_hash("sha1"))


@function("sha2", "hash", "sha2(x, 256) and sha2(x, 0): lower-case hex SHA-256; other bit lengths are refused")
def sha2(tr, args, name):
    s, bits = tr.args(args, name, 2)
    if not bits.constant or bits.value not in (0, 256):
        tr.refuse("sha2() with a bit length other than 256 (or 0)")
    if s.type.name != "binary":
        s = string_arg(tr, s, name)
    return Sql(f"sha256({s.text})", T.STRING, s.fails)


NODES.update({exp.DPipe: dpipe, exp.Trim: trim_node, exp.Substring: substring_node, exp.StrPosition: position_node, exp.Chr: chr_node})
