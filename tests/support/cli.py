"""Running ``debate`` in this process for a test of its input checks."""

from __future__ import annotations

import time

from app.cli import main


def timed_main(capsys, argv: list[str]) -> tuple[int, str, float]:
    """``debate ARGV`` in this process: its exit code, its stderr (stripped) and the seconds it took."""
    start = time.perf_counter()
    code = main(argv)
    took = time.perf_counter() - start
    return code, capsys.readouterr().err.strip(), took
