"""lakelog: a transactional table log for data lakes (a documented subset of the Delta Lake protocol).

The public names below are imported on first use (PEP 562), so ``import lakelog`` costs only this module
and ``lakelog.errors``: commands that read only the log start without pyarrow and the engines.
"""

from __future__ import annotations

import importlib

from . import errors
from .errors import (
    CommitConflictError,
    CorruptLogError,
    LakelogError,
    MultipleSourceMatchesError,
    PredicateError,
    PredicateViolationError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)

__version__ = "0.1.0"

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (type checkers treat the name as true)
if TYPE_CHECKING:  # for type checkers and IDEs; at run time __getattr__ imports them
    from .api import write_table
    from .conversion import convert
    from .schema.geospatial import geography, geometry
    from .schema.types import variant_field
    from .schema.variant_columns import with_variants
    from .table import Table, read_table
    from .write import WritePlan, plan_write

# public name -> the module that defines it
_LAZY = {
    "Table": "table",
    "read_table": "table",
    "write_table": "api",
    "plan_write": "write",
    "WritePlan": "write",
    "convert": "conversion",
    "geometry": "schema.geospatial",
    "geography": "schema.geospatial",
    "variant_field": "schema.types",
    "with_variants": "schema.variant_columns",
}

__all__ = [
    "Table",
    "read_table",
    "write_table",
    "plan_write",
    "WritePlan",
    "convert",
    "geometry",
    "geography",
    "variant_field",
    "with_variants",
    "errors",
    "LakelogError",
    "TableNotFoundError",
    "TableExistsError",
    "CommitConflictError",
    "SchemaMismatchError",
    "CorruptLogError",
    "UnsupportedFeatureError",
    "VersionNotFoundError",
    "PredicateError",
    "PredicateViolationError",
    "MultipleSourceMatchesError",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if not name.startswith("__"):
        # A submodule read as an attribute (``lakelog.check.check_table`` after ``import lakelog``), as it
        # could be when this package imported them all.
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
