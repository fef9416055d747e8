"""``python -m app``: the ``debate`` command without its console script."""

import sys

from app.cli import main

sys.exit(main())
