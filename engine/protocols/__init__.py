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

REGISTRY: dict[str, ProtocolFn] = {
    "cot": topology_debate,
    "sc": topology_debate,
    "mad": topology_debate,
    "sparse": topology_debate,
    "probmad": topology_debate,
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
