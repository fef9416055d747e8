"""A synchronous driver for protocol tests: feeds a protocol generator fake replies.

The engine drives protocols with :func:`engine.debate.debate` (agents, a model, call records);
these tests check a protocol's decisions alone, step by step, answering each request directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.protocols.base import Outcome, ProtocolGen, Request


def drive(gen: ProtocolGen, answer: Callable[[Request], Any]) -> Outcome:
    """Run a protocol generator, answering each request with ``answer(request)``."""
    try:
        request = next(gen)
        while True:
            request = gen.send(answer(request))
    except StopIteration as stop:
        return stop.value


def drive_steps(gen: ProtocolGen, reply: Callable[[Any, Any], Any]) -> tuple[list[Any], Outcome]:
    """Run a protocol that yields only Steps, answering each call with ``reply(step, call)``;
    returns every step the protocol made, in order, and its outcome."""
    from engine.protocols.base import Step

    steps: list[Step] = []

    def answer(request: Request) -> list[Any]:
        assert isinstance(request, Step), f"expected a Step, got {type(request).__name__}"
        steps.append(request)
        return [reply(request, call) for call in request.calls]

    return steps, drive(gen, answer)
