"""Where Spark's upper() and lower() differ from DuckDB's, character by character.

Spark 4 changes case with ICU (full case mappings: ``upper('ß')`` is ``'SS'``, ``lower('İ')`` is two
characters); DuckDB maps one character to one (utf8proc), and knows fewer characters. These tables
hold Spark's result for every code point where the two differ (measured over all of Unicode against
the Spark and DuckDB lakelog is tested with; the differential test checks them again). ``lower`` of
GREEK CAPITAL SIGMA depends on its neighbours in Spark (the final-sigma rule) and is refused. Table
expressions (``lakelog.spark_expressions``) and UTF8_LCASE's comparison keys (``lakelog.collations``)
both lower-case through ``mapped``.
"""

from __future__ import annotations


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def mapped(text: str, table: dict[str, str], duck: str) -> str:
    """DuckDB SQL applying DuckDB's ``duck`` (``upper``/``lower``) to ``text`` with Spark's result for the
    characters in ``table``."""
    chained = text
    for k, v in table.items():
        chained = f"replace({chained}, {_quote(k)}, {_quote(v)})"
    # the table only matters outside ASCII
    return f"(CASE WHEN regexp_matches({text}, '[^\\x00-\\x7f]') THEN {duck}({chained}) ELSE {duck}({text}) END)"


UPPER = {
    "\u00df": "SS", "\u0149": "\u02bcN", "\u019b": "\ua7dc", "\u01f0": "J\u030c", "\u0264": "\ua7cb",
    "\u0390": "\u0399\u0308\u0301", "\u03b0": "\u03a5\u0308\u0301", "\u0587": "\u0535\u0552", "\u1c8a": "\u1c89",
    "\u1e96": "H\u0331", "\u1e97": "T\u0308", "\u1e98": "W\u030a", "\u1e99": "Y\u030a", "\u1e9a": "A\u02be",
    "\u1f50": "\u03a5\u0313", "\u1f52": "\u03a5\u0313\u0300", "\u1f54": "\u03a5\u0313\u0301",
    "\u1f56": "\u03a5\u0313\u0342", "\u1f80": "\u1f08\u0399", "\u1f81": "\u1f09\u0399", "\u1f82": "\u1f0a\u0399",
    "\u1f83": "\u1f0b\u0399", "\u1f84": "\u1f0c\u0399", "\u1f85": "\u1f0d\u0399", "\u1f86": "\u1f0e\u0399",
    "\u1f87": "\u1f0f\u0399", "\u1f88": "\u1f08\u0399", "\u1f89": "\u1f09\u0399", "\u1f8a": "\u1f0a\u0399",
    "\u1f8b": "\u1f0b\u0399", "\u1f8c": "\u1f0c\u0399", "\u1f8d": "\u1f0d\u0399", "\u1f8e": "\u1f0e\u0399",
    "\u1f8f": "\u1f0f\u0399", "\u1f90": "\u1f28\u0399", "\u1f91": "\u1f29\u0399", "\u1f92": "\u1f2a\u0399",
    "\u1f93": "\u1f2b\u0399", "\u1f94": "\u1f2c\u0399", "\u1f95": "\u1f2d\u0399", "\u1f96": "\u1f2e\u0399",
    "\u1f97": "\u1f2f\u0399", "\u1f98": "\u1f28\u0399", "\u1f99": "\u1f29\u0399", "\u1f9a": "\u1f2a\u0399",
    "\u1f9b": "\u1f2b\u0399", "\u1f9c": "\u1f2c\u0399", "\u1f9d": "\u1f2d\u0399", "\u1f9e": "\u1f2e\u0399",
    "\u1f9f": "\u1f2f\u0399", "\u1fa0": "\u1f68\u0399", "\u1fa1": "\u1f69\u0399", "\u1fa2": "\u1f6a\u0399",
    "\u1fa3": "\u1f6b\u0399", "\u1fa4": "\u1f6c\u0399", "\u1fa5": "\u1f6d\u0399", "\u1fa6": "\u1f6e\u0399",
    "\u1fa7": "\u1f6f\u0399", "\u1fa8": "\u1f68\u0399", "\u1fa9": "\u1f69\u0399", "\u1faa": "\u1f6a\u0399",
    "\u1fab": "\u1f6b\u0399", "\u1fac": "\u1f6c\u0399", "\u1fad": "\u1f6d\u0399", "\u1fae": "\u1f6e\u0399",
    "\u1faf": "\u1f6f\u0399", "\u1fb2": "\u1fba\u0399", "\u1fb3": "\u0391\u0399", "\u1fb4": "\u0386\u0399",
    "\u1fb6": "\u0391\u0342", "\u1fb7": "\u0391\u0342\u0399", "\u1fbc": "\u0391\u0399", "\u1fc2": "\u1fca\u0399",
    "\u1fc3": "\u0397\u0399", "\u1fc4": "\u0389\u0399", "\u1fc6": "\u0397\u0342", "\u1fc7": "\u0397\u0342\u0399",
    "\u1fcc": "\u0397\u0399", "\u1fd2": "\u0399\u0308\u0300", "\u1fd3": "\u0399\u0308\u0301",
    "\u1fd6": "\u0399\u0342", "\u1fd7": "\u0399\u0308\u0342", "\u1fe2": "\u03a5\u0308\u0300",
    "\u1fe3": "\u03a5\u0308\u0301", "\u1fe4": "\u03a1\u0313", "\u1fe6": "\u03a5\u0342",
    "\u1fe7": "\u03a5\u0308\u0342", "\u1ff2": "\u1ffa\u0399", "\u1ff3": "\u03a9\u0399", "\u1ff4": "\u038f\u0399",
    "\u1ff6": "\u03a9\u0342", "\u1ff7": "\u03a9\u0342\u0399", "\u1ffc": "\u03a9\u0399", "\ua7cd": "\ua7cc",
    "\ua7cf": "\ua7ce", "\ua7d3": "\ua7d2", "\ua7d5": "\ua7d4", "\ua7db": "\ua7da", "\ufb00": "FF", "\ufb01": "FI",
    "\ufb02": "FL", "\ufb03": "FFI", "\ufb04": "FFL", "\ufb05": "ST", "\ufb06": "ST", "\ufb13": "\u0544\u0546",
    "\ufb14": "\u0544\u0535", "\ufb15": "\u0544\u053b", "\ufb16": "\u054e\u0546", "\ufb17": "\u0544\u053d",
    "\U00010d70": "\U00010d50", "\U00010d71": "\U00010d51", "\U00010d72": "\U00010d52", "\U00010d73": "\U00010d53",
    "\U00010d74": "\U00010d54", "\U00010d75": "\U00010d55", "\U00010d76": "\U00010d56", "\U00010d77": "\U00010d57",
    "\U00010d78": "\U00010d58", "\U00010d79": "\U00010d59", "\U00010d7a": "\U00010d5a", "\U00010d7b": "\U00010d5b",
    "\U00010d7c": "\U00010d5c", "\U00010d7d": "\U00010d5d", "\U00010d7e": "\U00010d5e", "\U00010d7f": "\U00010d5f",
    "\U00010d80": "\U00010d60", "\U00010d81": "\U00010d61", "\U00010d82": "\U00010d62", "\U00010d83": "\U00010d63",
    "\U00010d84": "\U00010d64", "\U00010d85": "\U00010d65", "\U00016ebb": "\U00016ea0", "\U00016ebc": "\U00016ea1",
    "\U00016ebd": "\U00016ea2", "\U00016ebe": "\U00016ea3", "\U00016ebf": "\U00016ea4", "\U00016ec0": "\U00016ea5",
    "\U00016ec1": "\U00016ea6", "\U00016ec2": "\U00016ea7", "\U00016ec3": "\U00016ea8", "\U00016ec4": "\U00016ea9",
    "\U00016ec5": "\U00016eaa", "\U00016ec6": "\U00016eab", "\U00016ec7": "\U00016eac", "\U00016ec8": "\U00016ead",
    "\U00016ec9": "\U00016eae", "\U00016eca": "\U00016eaf", "\U00016ecb": "\U00016eb0", "\U00016ecc": "\U00016eb1",
    "\U00016ecd": "\U00016eb2", "\U00016ece": "\U00016eb3", "\U00016ecf": "\U00016eb4", "\U00016ed0": "\U00016eb5",
    "\U00016ed1": "\U00016eb6", "\U00016ed2": "\U00016eb7", "\U00016ed3": "\U00016eb8",
}

LOWER = {
    "\u0130": "i\u0307", "\u1c89": "\u1c8a", "\ua7cb": "\u0264", "\ua7cc": "\ua7cd", "\ua7ce": "\ua7cf",
    "\ua7d2": "\ua7d3", "\ua7d4": "\ua7d5", "\ua7da": "\ua7db", "\ua7dc": "\u019b", "\U00010d50": "\U00010d70",
    "\U00010d51": "\U00010d71", "\U00010d52": "\U00010d72", "\U00010d53": "\U00010d73", "\U00010d54": "\U00010d74",
    "\U00010d55": "\U00010d75", "\U00010d56": "\U00010d76", "\U00010d57": "\U00010d77", "\U00010d58": "\U00010d78",
    "\U00010d59": "\U00010d79", "\U00010d5a": "\U00010d7a", "\U00010d5b": "\U00010d7b", "\U00010d5c": "\U00010d7c",
    "\U00010d5d": "\U00010d7d", "\U00010d5e": "\U00010d7e", "\U00010d5f": "\U00010d7f", "\U00010d60": "\U00010d80",
    "\U00010d61": "\U00010d81", "\U00010d62": "\U00010d82", "\U00010d63": "\U00010d83", "\U00010d64": "\U00010d84",
    "\U00010d65": "\U00010d85", "\U00016ea0": "\U00016ebb", "\U00016ea1": "\U00016ebc", "\U00016ea2": "\U00016ebd",
    "\U00016ea3": "\U00016ebe", "\U00016ea4": "\U00016ebf", "\U00016ea5": "\U00016ec0", "\U00016ea6": "\U00016ec1",
    "\U00016ea7": "\U00016ec2", "\U00016ea8": "\U00016ec3", "\U00016ea9": "\U00016ec4", "\U00016eaa": "\U00016ec5",
    "\U00016eab": "\U00016ec6", "\U00016eac": "\U00016ec7", "\U00016ead": "\U00016ec8", "\U00016eae": "\U00016ec9",
    "\U00016eaf": "\U00016eca", "\U00016eb0": "\U00016ecb", "\U00016eb1": "\U00016ecc", "\U00016eb2": "\U00016ecd",
    "\U00016eb3": "\U00016ece", "\U00016eb4": "\U00016ecf", "\U00016eb5": "\U00016ed0", "\U00016eb6": "\U00016ed1",
    "\U00016eb7": "\U00016ed2", "\U00016eb8": "\U00016ed3",
}
