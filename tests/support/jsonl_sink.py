"""A results sink made up for the plug-point tests: JSON lines, in one module.

Registered by the test that uses it (``register_sink("jsonl", JsonlSink)``, undone after), it
stores each flushed batch as ``OUT/<table>/part-<writer>-<n>.jsonl`` and the run's row as
``OUT/runs/<run_id>.json``, each written to a temporary name and renamed into place, as
:class:`engine.results.sinks.Sink` asks. :func:`read_jsonl` reads a table back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from engine.results.sinks import Sink, write_error


class JsonlSink(Sink):
    """One JSON object per row; values JSON cannot hold (timestamps) as their text."""

    def store_part(self, table: str, part: int, rows: list[dict[str, Any]]) -> None:
        _replace(self.out / table / f"part-{self.name}-{part:05d}.jsonl", rows)

    def store_run(self, row: dict[str, Any]) -> None:
        _replace(self.out / "runs" / f"{row['run_id']}.json", [row])


def _replace(path: Path, rows: list[dict[str, Any]]) -> None:
    """``rows`` as JSON lines at ``path``, whole or not at all (a failure: WriteFailed)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text("".join(json.dumps(r, default=str) + "\n" for r in rows))
        os.replace(tmp, path)
    except OSError as exc:
        raise write_error(exc, path) from exc


def read_jsonl(out: str | Path, table: str) -> list[dict[str, Any]]:
    """Every row of ``table`` stored in ``out`` (parts in name order; the runs table's rows too)."""
    folder = Path(out) / table
    return [json.loads(line) for f in sorted(folder.glob("*.json*")) for line in f.read_text().splitlines()]
