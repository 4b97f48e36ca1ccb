"""Settings read from environment variables (thread counts of row-level operations)."""

from __future__ import annotations

import os

from .errors import InvalidArgumentError


def positive_int(variable: str, what: str) -> int | None:
    """The value of ``variable`` as a positive integer (None when unset or empty); ``what`` it sets, for the
    error a bad value gets."""
    value = os.environ.get(variable)
    if not value:
        return None
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise InvalidArgumentError(f"{variable}={value!r} is not a positive integer ({what}); unset it or give a number such as 2")
    return n
