"""The vocabulary of ``calls.kind``: every value a built-in protocol records, declared once.

A call's ``kind`` is the prompt stage it was rendered from (:attr:`AgentCall.stage`,
:attr:`SummaryCall.stage`). :data:`KINDS` says, per kind, what the call was and which protocols
emit it; the README's table of kinds is :func:`markdown_table` (a test keeps them equal, and
another runs every protocol on the simulated model and checks each kind it emits is declared).
The debate driver checks every call it sends (:func:`check_kind`): a kind a built-in protocol
emits must be declared here; a protocol added outside the registry may also use the stages its
spec adds (:attr:`~engine.protocols.spec.ProtocolSpec.stages`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Kind:
    """One ``calls.kind`` value: what the call was (one line) and the protocols that emit it."""

    meaning: str
    protocols: tuple[str, ...]
    summary: bool = False  # a summary call (agent_id -1)
    side: bool = False  # a side call (calls.side: a review or a score, not a turn)


_MAD_FAMILY = ("mad", "sparse", "probmad")

KINDS: Mapping[str, Kind] = {
    "first": Kind("an agent's first answer, reading nobody", ("cot", "sc", *_MAD_FAMILY, "group", "s2mad", "prd")),
    "debate": Kind("a debate turn reading its peers' latest replies", _MAD_FAMILY),
    "self_check": Kind(
        "a debate turn of an agent with nobody to read: it re-examines its own answer",
        (*_MAD_FAMILY, "group", "s2mad"),
    ),
    "mad_summary": Kind(
        "--memory summary: a summary of the replies one agent reads (group = that agent)", _MAD_FAMILY, summary=True
    ),
    "mad_summary_debate": Kind("--memory summary: a debate turn reading its summary", _MAD_FAMILY),
    "gd_intra": Kind("an intra-group turn reading group mates' replies", ("group", "s2mad")),
    "gd_inter": Kind("an inter-group turn reading every group's summary", ("group", "s2mad")),
    "gd_summary": Kind("a group's summary at the end of a stage (group = the group)", ("group", "s2mad"), summary=True),
    "s2_intra": Kind("S2-MAD: an intra-group turn reading the mates left by the redundancy filter", ("s2mad",)),
    "s2_inter": Kind("S2-MAD: an inter-group turn reading the summaries left by the filter", ("s2mad",)),
    "s2_summary": Kind("S2-MAD: a group's summary of its unique replies", ("s2mad",), summary=True),
    "cortex_first": Kind("CortexDebate: a first answer with a stated confidence", ("cortex",)),
    "cortex_debate": Kind("CortexDebate: a turn reading the peers its pruned, weighted graph keeps", ("cortex",)),
    "cortex_self_check": Kind("CortexDebate: a turn of an agent its graph leaves alone", ("cortex",)),
    "cortex_score": Kind(
        "CortexDebate --cortex-weights peer: an agent scores one peer's answer", ("cortex",), side=True
    ),
    "reconcile_first": Kind("RECONCILE: a first answer with a confidence", ("reconcile",)),
    "reconcile_debate": Kind("RECONCILE: a turn reading the others' grouped answers", ("reconcile",)),
    "chateval_first": Kind("ChatEval: a referee's first message", ("chateval",)),
    "chateval_turn": Kind("ChatEval: a referee's turn reading the chat since its last one", ("chateval",)),
    "chateval_summary": Kind(
        "ChatEval --chateval-talk summarizer: the chat so far, summarised (group 0)", ("chateval",), summary=True
    ),
    "prd_review": Kind("PRD: an agent reviews one peer's solution", ("prd",), side=True),
    "prd_revise": Kind("PRD: an agent revises its answer reading the reviews it got", ("prd",)),
}


class UnknownKind(ValueError):
    """A protocol sent a call whose kind (stage) is declared nowhere: a bug in the protocol."""


def check_kind(kind: str, protocol: str, spec_stages: Mapping[str, Any] | None = None) -> None:
    """Raise :class:`UnknownKind` unless ``kind`` is in :data:`KINDS` (or among ``spec_stages``,
    the stages the protocol's own spec adds, for protocols outside the registry)."""
    if kind not in KINDS and kind not in (spec_stages or {}):
        raise UnknownKind(f"--protocol {protocol} sent a call of kind {kind!r}, declared nowhere (engine/kinds.py)")


def markdown_table() -> str:
    """The README's table of kinds: one row per kind, its meaning and protocols."""
    lines = ["| kind | the call | protocols |", "| --- | --- | --- |"]
    for name, k in KINDS.items():
        tags = (" (summary: agent_id −1)" if k.summary else "") + (" (side call)" if k.side else "")
        lines.append(f"| `{name}` | {k.meaning}{tags} | {', '.join(k.protocols)} |")
    return "\n".join(lines)
