"""The ``calls.kind`` vocabulary (engine/kinds.py): every kind every protocol emits in a simulated
run is declared, with the protocol that emitted it; every declared kind is emitted by some run;
the README's table is the declaration's; an undeclared kind stops the debate."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.local_run import run_local
from backends.simulated_backend import SimulatedBackend
from engine.config import RunConfig
from engine.kinds import KINDS, UnknownKind, check_kind, markdown_table
from engine.protocols import SPECS
from engine.tasks import arithmetic_questions

# configurations that together reach every kind (summaries, side calls, lone agents)
RUNS = [
    dict(protocol="cot"),
    dict(protocol="sc", agents=3),
    dict(protocol="mad", agents=3, rounds=2),
    dict(protocol="mad", agents=3, rounds=2, memory="summary"),
    dict(protocol="sparse", agents=4, rounds=2, density=0.333333),
    dict(protocol="mad", agents=1, rounds=2),
    dict(protocol="probmad", agents=4, rounds=2, density=0.5),
    dict(protocol="group", agents=5, rounds=3, groups="4+1", stage_rounds=2),
    dict(protocol="s2mad", agents=4, rounds=3, groups="2+2", stage_rounds=1),
    dict(protocol="s2mad", agents=4, rounds=3, groups="2+2", stage_rounds=1, filter=False),
    dict(protocol="s2mad", agents=5, rounds=3, groups="4+1", stage_rounds=2, jump=False),
    dict(protocol="cortex", agents=4, rounds=3, early_stop=False),
    dict(protocol="cortex", agents=3, rounds=2, cortex_weights="peer", early_stop=False),
    dict(protocol="cortex", agents=1, rounds=2, early_stop=False),
    dict(protocol="reconcile", agents=3, rounds=2, early_stop=False),
    dict(protocol="chateval", agents=3, rounds=2),
    dict(protocol="chateval", agents=3, rounds=2, chateval_talk="summarizer"),
    dict(protocol="prd", agents=3, rounds=2),
]


def _similarity(texts):
    """A made-up similarity: texts of equal length are alike (enough to drive every protocol)."""
    return [[1.0 if len(a) == len(b) else 0.1 for b in texts] for a in texts]


def _emitted(kw) -> set[str]:
    cfg = RunConfig(backend="simulated", **kw)
    qs = arithmetic_questions(3, seed=1)
    rows = run_local(cfg, qs, SimulatedBackend(reply_tokens=8, accuracy=0.5, follow=0.3), similarity=_similarity)
    return {r.kind for _, log in rows for r in log.records}


def test_every_kind_a_protocol_emits_is_declared_and_every_declared_kind_is_emitted():
    emitted: dict[str, set[str]] = {}
    for kw in RUNS:
        for kind in _emitted(kw):
            emitted.setdefault(kind, set()).add(kw["protocol"])
    undeclared = set(emitted) - set(KINDS)
    assert not undeclared
    for kind, protocols in emitted.items():
        assert protocols <= set(KINDS[kind].protocols), kind
    assert set(KINDS) == set(emitted)  # no declared kind that nothing emits
    assert {p for k in KINDS.values() for p in k.protocols} == set(SPECS)


def test_the_readme_table_is_the_declaration():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert markdown_table() in readme


def test_an_undeclared_kind_stops_the_debate():
    check_kind("first", "mad")
    check_kind("echo", "echo", {"echo": "Again: $question"})  # a protocol outside the registry: its own stages
    with pytest.raises(UnknownKind, match="'made_up'"):
        check_kind("made_up", "mad")
