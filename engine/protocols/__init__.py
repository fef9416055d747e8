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
    effective_rounds,
)
from engine.protocols.mad import build_topology, topology_debate


# Protocol name -> (module, function). Modules are imported on first lookup: importing one
# registers its prompt stages, so look the protocol up before building a PromptSet.
_MODULES: dict[str, tuple[str, str]] = {
    "cot": ("engine.protocols.mad", "topology_debate"),
    "sc": ("engine.protocols.mad", "topology_debate"),
    "mad": ("engine.protocols.mad", "topology_debate"),
    "sparse": ("engine.protocols.mad", "topology_debate"),
    "probmad": ("engine.protocols.mad", "topology_debate"),
    "group": ("engine.protocols.group_debate", "group_debate"),
    "s2mad": ("engine.protocols.s2mad", "s2mad"),
    "cortex": ("engine.protocols.cortex", "cortex_debate"),
}


def protocol_module(name: str):
    import importlib

    if name not in _MODULES:
        raise ValueError(f"--protocol {name!r} is not one of {', '.join(_MODULES)}")
    return importlib.import_module(_MODULES[name][0])


def get_protocol(name: str) -> ProtocolFn:
    """The protocol's generator function (imports its module, registering its prompt stages)."""
    return getattr(protocol_module(name), _MODULES[name][1])


def validate_protocol(cfg) -> None:
    """Protocol-specific checks before a run starts (a module's optional ``validate(cfg)``)."""
    check = getattr(protocol_module(cfg.protocol), "validate", None)
    if check is not None:
        check(cfg)


__all__ = [
    "SUMMARIZER", "AgentCall", "Context", "Outcome", "Reply", "Similarity", "Step", "SummaryCall",
    "build_topology", "protocol_module", "validate_protocol", "consensus", "effective_rounds", "get_protocol", "topology_debate",
]
