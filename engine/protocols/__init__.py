"""Debate protocols as generators (see :mod:`engine.protocols.base`) and their registry."""

from __future__ import annotations

from engine.protocols.base import (
    SUMMARIZER,
    AgentCall,
    Context,
    Outcome,
    ProtocolFn,
    Reply,
    Similarity,
    Step,
    SummaryCall,
    consensus,
    drive,
    effective_rounds,
)
from engine.protocols.mad import build_topology, topology_debate


def _lazy(module: str, name: str) -> ProtocolFn:
    """A protocol whose module is imported on first use."""

    def protocol(ctx: Context):
        import importlib

        return getattr(importlib.import_module(module), name)(ctx)

    protocol.__name__ = name
    return protocol


REGISTRY: dict[str, ProtocolFn] = {
    "cot": topology_debate,
    "sc": topology_debate,
    "mad": topology_debate,
    "sparse": topology_debate,
    "probmad": topology_debate,
    "group": _lazy("engine.protocols.group_debate", "group_debate"),
    "s2mad": _lazy("engine.protocols.s2mad", "s2mad"),
    "cortex": _lazy("engine.protocols.cortex", "cortex_debate"),
}


def get_protocol(name: str) -> ProtocolFn:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"--protocol {name!r} is not one of {', '.join(REGISTRY)}") from None


__all__ = [
    "SUMMARIZER", "AgentCall", "Context", "Outcome", "Reply", "Similarity", "Step", "SummaryCall",
    "REGISTRY", "build_topology", "consensus", "drive", "effective_rounds", "get_protocol", "topology_debate",
]
