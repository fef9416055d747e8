"""Where things are: the repository root and the real benchmark data files."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The real data sets (tests that need a file skip without it): DEBATE_DATA_DIR, else the shared
# folder beside the checkout.
DATA_DIR = Path(os.environ.get("DEBATE_DATA_DIR", ROOT.parent / "shared" / "data"))
