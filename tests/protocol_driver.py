"""A synchronous driver for protocol tests: feeds a protocol generator fake replies.

The engine drives protocols with :func:`engine.debate.debate` (agents, a model, call records);
these tests check a protocol's decisions alone, step by step, answering each request directly.
"""

from __future__ import annotations

from typing import Any, Callable

from engine.protocols.base import Outcome, ProtocolGen, Request


def drive(gen: ProtocolGen, answer: Callable[[Request], Any]) -> Outcome:
    """Run a protocol generator, answering each request with ``answer(request)``."""
    try:
        request = next(gen)
        while True:
            request = gen.send(answer(request))
    except StopIteration as stop:
        return stop.value
