"""Test rows for the Parquet tables: the sink rejects a row that lacks a column (a bug in the
engine), so tests that write hand-made rows fill the columns they do not care about with null."""

from __future__ import annotations

from typing import Any


def complete_rows(table: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from engine.results import OPTIONAL, SCHEMAS

    blank = {k: None for k in SCHEMAS[table].names if k not in OPTIONAL.get(table, ())}
    return [{**blank, **r} for r in rows]
