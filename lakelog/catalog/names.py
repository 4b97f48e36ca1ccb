"""Catalog names: ``glue://database/table`` and its dotted form ``database.table``."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidArgumentError, UnsupportedFeatureError
from ..storage.location import CATALOG_SCHEMES, url_scheme

GLUE = "glue"
_REFUSED = {
    "unity": "Unity Catalog is not supported (specs/catalogs.md says what it would take); open the table by its storage location",
    "uc": "Unity Catalog is not supported (specs/catalogs.md says what it would take); open the table by its storage location",
}


@dataclass(frozen=True)
class CatalogName:
    """A table's name in a catalog: ``scheme`` (``glue``), ``database`` and ``table``."""

    scheme: str
    database: str
    table: str

    @property
    def uri(self) -> str:
        return f"{self.scheme}://{self.database}/{self.table}"

    @property
    def dotted(self) -> str:
        return f"{self.database}.{self.table}"

    def __str__(self) -> str:
        return self.uri


def catalog_name(path: object) -> CatalogName | None:
    """The catalog name ``path`` is (``glue://db/t``), None for a storage path or URL; malformed names and
    catalogs lakelog does not support raise."""
    if not isinstance(path, str):
        return None
    scheme = url_scheme(path)
    if scheme not in CATALOG_SCHEMES:
        return None
    if scheme in _REFUSED:
        raise UnsupportedFeatureError(f"{path!r}: {_REFUSED[scheme]}")
    parts = path.split("://", 1)[1].strip("/").split("/")
    if len(parts) != 2 or not all(p.strip() for p in parts):
        raise InvalidArgumentError(f"{path!r} is not a Glue table name; write it glue://database/table")
    return CatalogName(GLUE, parts[0], parts[1])


def glue_name(text: str) -> CatalogName:
    """``database.table`` (or ``glue://database/table``) as a Glue name."""
    if not isinstance(text, str):
        from ..errors import InvalidArgumentTypeError

        raise InvalidArgumentTypeError(f"a Glue table name is a str, database.table or glue://database/table, not {type(text).__name__}")
    if "://" in text:
        name = catalog_name(text)
        if name is None:
            raise InvalidArgumentError(f"{text!r} is not a Glue table name; write it database.table or glue://database/table")
        return name
    database, sep, table = text.partition(".")
    if not sep or not database.strip() or not table.strip() or "." in table or "/" in text:
        raise InvalidArgumentError(f"{text!r} is not a Glue table name; write it database.table")
    return CatalogName(GLUE, database, table)


def parse_names(value: str, key: str) -> list[CatalogName]:
    """The catalog names of a comma-separated list (a table property ``key``)."""
    from ..errors import InvalidTablePropertyError

    out = []
    for part in (p.strip() for p in str(value).split(",")):
        if not part:
            continue
        try:
            name = catalog_name(part)
        except (InvalidArgumentError, UnsupportedFeatureError) as e:
            raise InvalidTablePropertyError(f"table property {key}={value!r}: {e}", key=key, value=value) from None
        if name is None:
            raise InvalidTablePropertyError(
                f"table property {key}={value!r}: {part!r} is not a catalog name; list glue://database/table names, comma separated",
                key=key, value=value)
        out.append(name)
    return out
