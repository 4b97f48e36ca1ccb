"""Parquet Variant values: the binary codec, JSON text as Spark's ``parse_json``/``to_json``, Arrow
columns and reassembly of shredded columns."""

from .arrow import (
    VARIANT_ARROW_TYPE,
    from_json_array,
    from_python,
    to_json_array,
    to_python,
)
from .codec import VARIANT_NULL, decode, encode
from .json_text import parse_json, to_json
from .shredding import unshred

__all__ = [
    "VARIANT_ARROW_TYPE",
    "VARIANT_NULL",
    "decode",
    "encode",
    "from_json_array",
    "from_python",
    "parse_json",
    "to_json",
    "to_json_array",
    "to_python",
    "unshred",
]
