"""lakelog: a transactional table log for data lakes (a documented subset of the Delta Lake protocol)."""

__version__ = "0.1.0"

from . import errors  # noqa: E402
from .errors import (  # noqa: E402
    CommitConflictError,
    CorruptLogError,
    LakelogError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
    MultipleSourceMatchesError,
    PredicateError,
    PredicateViolationError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from .table import Table, read_table  # noqa: E402
from .write import WritePlan, plan_write  # noqa: E402
from .api import write_table  # noqa: E402
from .conversion import convert  # noqa: E402
from .geospatial import geography, geometry  # noqa: E402
from .schema import variant_field  # noqa: E402
from .variant_columns import with_variants  # noqa: E402

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
