"""``python -m lakelog.cli``."""

from . import run

run()
