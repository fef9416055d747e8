"""Debate protocols as generators (see :mod:`engine.protocols.base`) and their registry.

:data:`SPECS` is the one registration point: each protocol module declares its
:class:`~engine.protocols.spec.ProtocolSpec` (generator, options, checks, prompt stages,
embeddings, fixed graph, cost model, report label) and is listed here once. Everything else in
the engine looks protocols up with :func:`protocol_spec`.
"""

from __future__ import annotations

from engine.options import ConfigError
from engine.protocols import chateval, cortex, group_debate, mad, prd, reconcile, s2mad
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
from engine.protocols.spec import ProtocolSpec

# name -> spec, in the order help texts and reports list them
SPECS: dict[str, ProtocolSpec] = {
    s.name: s for s in (*mad.SPECS, group_debate.SPEC, s2mad.SPEC, cortex.SPEC, reconcile.SPEC, chateval.SPEC, prd.SPEC)
}


def protocol_names() -> tuple[str, ...]:
    return tuple(SPECS)


def protocol_spec(name: str) -> ProtocolSpec:
    """The spec of ``--protocol name`` (a ValueError naming the known ones otherwise)."""
    try:
        return SPECS[name]
    except KeyError:
        raise ConfigError(f"--protocol {name!r} is not one of {', '.join(SPECS)}") from None


def get_protocol(name: str) -> ProtocolFn:
    """The protocol's generator function."""
    return protocol_spec(name).run


def validate_protocol(cfg) -> None:
    """The protocol's own checks before a run starts (its spec's ``validate``)."""
    check = protocol_spec(cfg.experiment.protocol).validate
    if check is not None:
        check(cfg)


def prompt_stages() -> dict[str, str]:
    """Every protocol's added prompt stages (name -> template)."""
    return {name: text for spec in SPECS.values() for name, text in spec.stages.items()}


def prompt_stage_fields() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for spec in SPECS.values():
        for name, extra in spec.stage_fields.items():
            out.setdefault(name, set()).update(extra)
    return out


__all__ = [
    "SPECS",
    "SUMMARIZER",
    "AgentCall",
    "Context",
    "Outcome",
    "ProtocolSpec",
    "Reply",
    "Similarity",
    "Step",
    "SummaryCall",
    "build_topology",
    "consensus",
    "effective_rounds",
    "get_protocol",
    "prompt_stage_fields",
    "prompt_stages",
    "protocol_names",
    "protocol_spec",
    "topology_debate",
    "validate_protocol",
]
