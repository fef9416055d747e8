"""The memory a run will need, estimated from its options before anything is allocated.

Three sizes grow with the options faster than a run's questions do; each is checked against the
memory this machine has available (:func:`available_bytes`) before it is allocated, and a run
that would not fit fails with one line naming the flag, the estimate and what is available:

* the agent graphs (:func:`check_graph`, from :meth:`RunConfig.validate`): N x N arrays of 8-byte
  numbers (the fully connected graph's peers, CortexDebate's weights, S2-MAD's and CortexDebate's
  similarities), :data:`GRAPH_BYTES_PER_PAIR` per pair of agents;
* the generated arithmetic questions (:func:`check_questions`, before they are generated):
  :data:`QUESTION_BYTES` each (a data file's questions are as many as its rows, whatever
  ``--limit`` says);
* the text of the questions in flight (:func:`engine.plan.check_in_flight`, once the questions are loaded):
  the prompt and completion tokens the cost model predicts for one question (:mod:`engine.plan`:
  replies of ``--sim-reply-tokens`` on the simulated backend, else of ``--max-tokens``, an upper
  bound), times ``--max-concurrent-questions``, at :data:`TEXT_BYTES_PER_TOKEN`. Where the cost
  model has no prediction, every call's own question and reply only (a lower bound).

The constants are rough upper estimates, not measurements of a run; they are meant to stop runs
that cannot fit (gigabytes past what the machine has), not to tune ones that can.
"""

from __future__ import annotations

import psutil

from engine.dataset_routing import ARITHMETIC_LIMIT
from engine.options import ConfigError

GRAPH_BYTES_PER_PAIR = 4 * 8  # about four N x N arrays of 8-byte numbers alive at once
QUESTION_BYTES = 1024  # one generated arithmetic question (about 700 bytes measured) and its list entry
TEXT_BYTES_PER_TOKEN = 16  # about 5 characters a token, held about 3 times (debate log, writer, Ray copy)

__all__ = ["available_bytes", "check_fits", "check_graph", "check_questions"]


def available_bytes() -> int:
    """The memory this machine has available now (:func:`psutil.virtual_memory`)."""
    return int(psutil.virtual_memory().available)


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def check_fits(need: float, what: str, fix: str) -> None:
    """A ConfigError saying ``what`` needs ``need`` bytes, more than this machine has available, and
    ``fix``; nothing when it fits."""
    have = available_bytes()
    if need > have:
        raise ConfigError(
            f"{what} need about {_gib(need)} of memory and this machine has {_gib(have)} available; {fix}"
        )


def check_graph(n: int) -> None:
    """The N x N graphs of ``n`` agents fit in memory; else a ConfigError naming ``--agents``."""
    check_fits(n * n * GRAPH_BYTES_PER_PAIR, f"--agents {n}: the agent graphs ({n} x {n})", "use fewer agents")


def check_questions(dataset: str, limit: int | None) -> None:
    """The questions ``--dataset arithmetic`` would generate (``limit``) fit in memory; else a
    ConfigError naming ``--limit``. (A data file's questions are as many as its rows.)"""
    if dataset != "arithmetic":
        return
    n = limit or ARITHMETIC_LIMIT
    check_fits(n * QUESTION_BYTES, f"--limit {n}: {n:,} generated questions", "lower --limit")
