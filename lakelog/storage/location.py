"""Table locations: the place fsspec opens for a path or URL, named as delta-rs names it."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from ..errors import InvalidArgumentError

_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):(.*)$", re.DOTALL)
# Names of tables in catalogs, not storage locations: ``lakelog.catalog`` resolves them.
CATALOG_SCHEMES = ("glue", "unity", "uc")


def url_scheme(uri: str) -> str | None:
    """The lower-case scheme of a URL with an authority (``s3://...``), else None (a plain path)."""
    m = _SCHEME_RE.match(uri)
    if not m or "::" in uri or not m.group(2).startswith("//"):
        return None
    return m.group(1).lower()


def resolve_location(uri: str) -> str:
    """The location fsspec opens for the table ``uri``, naming the same place delta-rs does.

    A URL's path is percent-decoded once, as delta-rs (object_store) decodes it: ``file:///tmp/my%20table``
    is the directory ``/tmp/my table`` and ``s3://bucket/my%20table`` the prefix ``my table``.
    ``file:/abs`` and ``file://localhost/abs`` are local paths too. A plain path is taken literally
    (``~`` expands, a relative path is relative to the working directory). Refused, with
    ``InvalidArgumentError``: a ``file:`` URL with another host or a relative path, a query or fragment
    (percent-encode ``?`` and ``#`` in names), and escapes that are not UTF-8.
    """
    m = _SCHEME_RE.match(uri)
    if not m or "::" in uri:
        return uri  # a plain path (a Windows drive letter is one character), or an fsspec chained URL
    scheme = m.group(1).lower()
    parts = urlsplit(uri)
    if parts.query or parts.fragment or uri.endswith(("?", "#")):
        raise InvalidArgumentError(
            f"table location {uri!r} has a query or fragment ('?' or '#'), which table locations do not take; "
            "percent-encode '?' as %3F and '#' as %23 if they are part of a name"
        )
    try:
        path = unquote(parts.path, errors="strict")
        host = unquote(parts.netloc, errors="strict")
    except UnicodeDecodeError:
        raise InvalidArgumentError(f"table location {uri!r} has percent-escapes that are not UTF-8") from None
    if scheme in ("file", "local"):
        if parts.netloc not in ("", "localhost"):
            raise InvalidArgumentError(
                f"table location {uri!r} names the host {parts.netloc!r}; file URLs name local paths: "
                "file:///absolute/path (three slashes), or a plain path"
            )
        if not path.startswith("/"):
            raise InvalidArgumentError(f"table location {uri!r} is a relative file URL; use file:///absolute/path or a plain path")
        return path
    if not uri[len(m.group(1)) + 1 :].startswith("//"):
        return uri  # not a URL with an authority (e.g. a local file name with a colon)
    return f"{scheme}://{host}{path}"


def table_url(uri: str, local_root: str | None = None) -> str:
    """The table at ``uri`` named as Hadoop prints its path, as Delta names it where other engines read
    it (UniForm's Iceberg metadata, symlink manifests): for a local table (``local_root``, its absolute
    path) ``file:/absolute/path``; otherwise the URL with its scheme and authority as given and its path
    percent-decoded once (the name the store uses), without a trailing slash."""
    if local_root is not None:
        return "file:" + local_root.rstrip("/")
    if url_scheme(uri) is None:
        return uri.rstrip("/")
    return resolve_location(uri).rstrip("/")
