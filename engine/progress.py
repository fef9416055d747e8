"""Progress on stderr: a tqdm bar on a terminal, a line now and then anywhere else.

A bar redraws itself with carriage returns, which a log file or a pipe keeps as one very long
line (and in between the lines other code writes). :func:`progress` gives tqdm's bar where
stderr is a terminal and a :class:`LineProgress` elsewhere: whole lines, at most one per
``interval`` seconds, and one at the end. Both answer the same calls (``update``, ``set_postfix``,
``n``, ``close``), so the caller does not care which it got.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

LINE_INTERVAL_S = 15.0  # seconds between two progress lines in a log


class LineProgress:
    """Progress as whole lines: ``desc: 12/20 q (60%) calls=72, tok=9400, 31 s``."""

    def __init__(
        self,
        total: int,
        initial: int = 0,
        unit: str = "it",
        desc: str = "",
        interval: float = LINE_INTERVAL_S,
        file: TextIO | None = None,
        clock=time.monotonic,
    ):
        self.total, self.n, self.unit, self.desc = total, initial, unit, desc
        self.interval, self.file, self.clock = interval, file, clock
        self.start = self.last = clock()
        self.postfix: dict[str, Any] = {}
        self.closed = False

    def set_postfix(self, refresh: bool = True, **values: Any) -> None:
        """Values printed after the count on the next line (tqdm's call; ``refresh`` is ignored)."""
        self.postfix = values

    def update(self, n: int = 1) -> None:
        """Count ``n`` more; print a line when ``interval`` has passed since the last one."""
        self.n += n
        if n and self.clock() - self.last >= self.interval:
            self._line()

    def close(self) -> None:
        """Print the last line (once)."""
        if not self.closed:
            self.closed = True
            self._line()

    def text(self) -> str:
        """The line as it would print now."""
        share = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        extra = ", ".join(f"{k}={v}" for k, v in self.postfix.items())
        elapsed = f"{self.clock() - self.start:.0f} s"
        head = f"{self.desc}: " if self.desc else ""
        return f"{head}{self.n}/{self.total} {self.unit}{share} {extra + ', ' if extra else ''}{elapsed}"

    def _line(self) -> None:
        self.last = self.clock()
        print(self.text(), file=self.file or sys.stderr, flush=True)


def progress(total: int, initial: int = 0, unit: str = "it", desc: str = "", disable: bool = False) -> Any:
    """A progress display for ``total`` items on stderr: tqdm's bar on a terminal, else a
    :class:`LineProgress`; ``disable``: a tqdm bar that shows nothing."""
    # function-level: importing tqdm here keeps it off start-up
    from tqdm import tqdm

    if disable or sys.stderr.isatty():
        return tqdm(total=total, initial=initial, unit=unit, desc=desc, mininterval=1.0, disable=disable)
    return LineProgress(total, initial, unit, desc)
