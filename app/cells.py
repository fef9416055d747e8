"""One cell of a sweep: a grid point's configuration, where it writes, and how it went.

:mod:`app.sweep` makes and runs the cells; :mod:`app.plan_table` lists them with their predictions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.config import RunConfig


@dataclass
class Cell:
    index: int  # position among the sweep's unique cells, in grid order
    params: dict[str, Any]  # the grid values this cell reads (after normalisation)
    config: RunConfig  # normalised, ``out`` set to ``out`` below
    run_id: str
    out: Path  # DIR/<cell_dir_name> (DIR/<run_id> in a sweep started before folder names)
    error: str | None = None  # why the cell is invalid (or why its run failed)
    n_points: int = 1  # grid points that normalised to this cell
    status: str = "pending"
    result: dict[str, Any] = field(default_factory=dict)  # accuracy, tokens, ... once finished

    @property
    def valid(self) -> bool:
        return self.status != "invalid"

    @property
    def label(self) -> str:
        return " ".join(f"{k}={short_value(v)}" for k, v in self.params.items()) or self.run_id


def short_value(v: Any) -> str:
    """A grid value for a label: text as is, a float to 4 significant digits (2/3 -> 0.6667), the
    rest as JSON; cut at 40 characters."""
    if isinstance(v, float):
        return f"{v:.4g}"
    s = v if isinstance(v, str) else json.dumps(v, default=str)
    return s if len(s) <= 40 else s[:37] + "..."
