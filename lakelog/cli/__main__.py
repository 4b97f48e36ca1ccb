"""``python -m lakelog.cli``."""

import sys

from . import main

sys.exit(main())
