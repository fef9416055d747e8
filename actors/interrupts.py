"""Ctrl-C and SIGTERM end a run in one line, with what was written saved and resumable.

:func:`stop_signals` makes SIGTERM (what SLURM, Kubernetes and ``kill`` send) behave as Ctrl-C
does: it raises ``KeyboardInterrupt`` in the main thread, replacing the handler Ray's core installs
(which aborts the process with a native stack dump and exit 134). ``KeyboardInterrupt`` is the one
exception Ray's blocking calls (``ray.get``, ``ray.wait``) pass on from a signal handler; they
raise a new one, so the signal that caused it is kept here (:func:`exit_code`). The run that
catches it stops its debates, flushes the writer, marks the run ``interrupted`` and ends with
``interrupted: N/M questions saved in OUT; run the same command to resume``; the command exits 130
for SIGINT and 143 for SIGTERM, as a shell reports a process ended by them. A second signal while
that cleanup runs ends the process at once (the next run takes over its lock).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_handler: Callable[[int, Any], None] | None = None  # the active block's (an outer one: a sweep's)
_received: list[int] = []  # the signals the active block received, in order


def exit_code() -> int:
    """128 + the first signal the active (or last) block received: 130 for SIGINT (also when none
    was recorded: a plain Ctrl-C outside a block), 143 for SIGTERM."""
    return 128 + (_received[0] if _received else signal.SIGINT)


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """Inside the block, SIGINT and SIGTERM raise ``KeyboardInterrupt`` (see the module
    docstring). A nested block keeps the outer one's handlers; outside the main thread it does
    nothing."""
    global _handler
    if _handler is not None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        if _received:  # a second signal: no more cleanup
            sys.stderr.write(f"\ndebate: {signal.Signals(signum).name} again: stopping now\n")
            sys.stderr.flush()
            os._exit(128 + signum)
        _received.append(signum)
        raise KeyboardInterrupt(signal.Signals(signum).name)

    old = {s: signal.getsignal(s) for s in SIGNALS}
    _received.clear()
    _handler = handler
    try:
        reinstall()
        yield
    finally:
        _handler = None
        for s, h in old.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


def reinstall() -> None:
    """Install the active block's handlers again: ``ray.init`` replaces the SIGTERM handler of the
    process it starts in (:func:`actors.driver.init_ray` calls this after it)."""
    if _handler is not None and threading.current_thread() is threading.main_thread():
        for s in SIGNALS:
            signal.signal(s, _handler)
