"""MAD-family memory modes (full, last, summary, summary-last), GroupDebate's full memory and the
one-by-one talk order: step tests on the protocol generators, and runs on the simulated model."""

from __future__ import annotations

import pytest

from engine.config import ConfigError, RunConfig
from engine.protocols.base import AgentCall, Context, Reply, Step, SummaryCall
from engine.tasks import arithmetic_questions
from tests.support.protocol_driver import drive


def _trace(cfg: RunConfig):
    """Run a protocol on fake replies; every reply's text names who made it and when."""
    from engine.protocols import get_protocol

    steps: list[Step] = []
    counter = {"n": 0}

    def answer(req):
        steps.append(req)
        out = []
        for call in req.calls:
            counter["n"] += 1
            who = f"S{call.agent}" if isinstance(call, SummaryCall) else f"A{call.agent}"
            out.append(Reply(text=f"{who}r{req.round}#{counter['n']}", answer=str(call.agent)))
        return out

    ctx = Context(question=arithmetic_questions(1, seed=0)[0], cfg=cfg.validate(), key=7)
    outcome = drive(get_protocol(cfg.experiment.protocol)(ctx), answer)
    return steps, outcome


def test_summary_memory_summarises_what_each_agent_reads_before_it_speaks():
    steps, outcome = _trace(RunConfig.flat(protocol="mad", agents=3, rounds=3, memory="summary", backend="simulated"))
    kinds = [[type(c).__name__ for c in s.calls] for s in steps]
    assert kinds == [["AgentCall"] * 3, ["SummaryCall"] * 3, ["AgentCall"] * 3, ["SummaryCall"] * 3, ["AgentCall"] * 3]
    summaries, debate = steps[1].calls, steps[2].calls
    for i, (summ, call) in enumerate(zip(summaries, debate)):
        assert summ.agent == i and summ.sources == [j for j in range(3) if j != i]  # without its own reply
        assert summ.stage == "mad_summary" and all(t.startswith("A") and "r0" in t for t in summ.texts)
        assert call.stage == "mad_summary_debate" and call.memory == "full" and call.peer_texts == []
        assert call.values["summary"].startswith(f"S{i}r0")  # its own summary, made after round 0
    assert outcome.rounds_run == 3
    steps, _ = _trace(RunConfig.flat(protocol="mad", agents=3, rounds=2, memory="summary-last", backend="simulated"))
    assert {c.memory for s in steps for c in s.calls if isinstance(c, AgentCall)} == {"last"}


def test_sparse_summary_has_no_summary_for_an_agent_reading_nobody():
    steps, _ = _trace(
        RunConfig.flat(
            protocol="sparse", agents=4, rounds=2, topology="star", center=0, memory="summary", backend="simulated"
        )
    )
    summaries = steps[1].calls
    assert [s.agent for s in summaries] == [0, 1, 2, 3] and summaries[0].sources == [1, 2, 3]
    assert all(s.sources == [0] for s in summaries[1:])
    steps, _ = _trace(
        RunConfig.flat(protocol="sparse", agents=4, rounds=2, density=0.0, memory="summary", backend="simulated")
    )
    assert len(steps) == 2 and {c.stage for c in steps[1].calls} == {"self_check"}


def test_one_by_one_talk_reads_this_rounds_replies_of_agents_that_already_spoke():
    steps, outcome = _trace(RunConfig.flat(protocol="mad", agents=3, rounds=2, talk="one-by-one", backend="simulated"))
    assert [len(s.calls) for s in steps] == [3, 1, 1, 1] and [s.round for s in steps] == [0, 1, 1, 1]
    shown = {s.calls[0].agent: dict(s.calls[0].peer_texts) for s in steps[1:]}
    assert shown[0][1].startswith("A1r0") and shown[0][2].startswith("A2r0")
    assert shown[1][0].startswith("A0r1") and shown[1][2].startswith("A2r0")  # agent 0 already spoke in round 1
    assert shown[2][0].startswith("A0r1") and shown[2][1].startswith("A1r1")
    assert outcome.answers_by_round[-1] == ["0", "1", "2"]
    simultaneous, _ = _trace(RunConfig.flat(protocol="mad", agents=3, rounds=2, backend="simulated"))
    assert all(t.startswith(f"A{j}r0") for j, t in simultaneous[1].calls[2].peer_texts)


def test_one_by_one_with_summaries_summarises_the_latest_replies():
    steps, _ = _trace(
        RunConfig.flat(protocol="mad", agents=3, rounds=2, talk="one-by-one", memory="summary", backend="simulated")
    )
    assert [type(s.calls[0]).__name__ for s in steps[1:]] == ["SummaryCall", "AgentCall"] * 3
    last_summary = steps[5].calls[0]
    assert last_summary.agent == 2 and [t[:4] for t in last_summary.texts] == ["A0r1", "A1r1"]


def test_group_debate_full_memory_is_the_mad_plus_group_ablation():
    steps, _ = _trace(RunConfig.flat(protocol="group", agents=4, rounds=3, groups="2+2", backend="simulated"))
    assert {c.memory for s in steps for c in s.calls if isinstance(c, AgentCall)} == {"last"}
    steps, _ = _trace(
        RunConfig.flat(protocol="group", agents=4, rounds=3, groups="2+2", memory="full", backend="simulated")
    )
    assert {c.memory for s in steps for c in s.calls if isinstance(c, AgentCall)} == {"full"}


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"protocol": "mad", "forgetting": True, "memory": "summary"}, "--forgetting means --memory last"),
        ({"protocol": "group", "memory": "summary"}, "--memory summary is not a memory of --protocol group"),
        ({"protocol": "mad", "memory": "everything"}, "--memory 'everything' is not one of"),
        ({"protocol": "mad", "talk": "random"}, "--talk 'random' is not one of"),
    ],
)
def test_memory_and_talk_flags_are_checked(kw, message):
    with pytest.raises(ConfigError, match=message):
        RunConfig.flat(**kw).validate()


def test_forgetting_is_an_alias_of_memory_last():
    a, _ = _trace(RunConfig.flat(protocol="mad", agents=3, rounds=3, forgetting=True, backend="simulated"))
    b, _ = _trace(RunConfig.flat(protocol="mad", agents=3, rounds=3, memory="last", backend="simulated"))
    assert [[(c.agent, c.stage, c.memory) for c in s.calls] for s in a] == [
        [(c.agent, c.stage, c.memory) for c in s.calls] for s in b
    ]


def test_new_modes_run_end_to_end_with_exact_token_accounting():
    """run_local (the engine's own debate() driver, simulated model): summary calls are recorded
    as summaries (agent -1), counted in the question row, and the report label names the mode."""
    from actors.local_run import run_local
    from app.report import RunData, base_label
    from backends.simulated_backend import SimulatedBackend

    cfg = RunConfig.flat(
        protocol="mad", agents=3, rounds=3, memory="summary", talk="one-by-one", backend="simulated"
    ).validate()
    rows = run_local(cfg, arithmetic_questions(2, seed=1), SimulatedBackend())
    for row, log in rows:
        assert row["n_summary_calls"] == 6 and row["n_calls"] == 9 + 6
        assert sum(r.prompt_tokens for r in log.records) == row["prompt_tokens"]
    data = RunData(run_dir=None, run_id="x", run={}, config=cfg.to_dict(), questions=[], calls=None)
    assert base_label(data) == "mad 3x3 mem=summary one-by-one (SIMULATED)"


def test_first_round_seed_fixes_the_first_answers_and_resamples_the_rest():
    """--first-round-seed: round 0 is seeded by it (same replies whatever --seed is); later rounds
    follow --seed. Without it, round 0 changes with --seed too."""
    from actors.local_run import run_local
    from backends.simulated_backend import SimulatedBackend

    qs = arithmetic_questions(4, seed=2)

    def calls(**kw):
        cfg = RunConfig.flat(protocol="mad", agents=3, rounds=2, backend="simulated", temperature=1.0, **kw).validate()
        out = {}
        for _, log in run_local(cfg, qs, SimulatedBackend(accuracy=0.5, follow=0.3)):
            for rec in log.records:
                out[(rec.question_id, rec.agent_id, rec.round)] = (rec.seed, rec.text)
        return out

    a, b = calls(seed=1, first_round_seed=9), calls(seed=2, first_round_seed=9)
    first = [k for k in a if k[2] == 0]
    later = [k for k in a if k[2] == 1]
    assert all(a[k] == b[k] for k in first)
    assert all(a[k][0] != b[k][0] for k in later)  # later rounds resampled
    c, d = calls(seed=1), calls(seed=2)
    assert all(c[k][0] != d[k][0] for k in first)
    assert RunConfig.flat(first_round_seed=9).run_id() != RunConfig().run_id()
    with pytest.raises(ConfigError, match="--first-round-seed must be an integer"):
        RunConfig.flat(first_round_seed="x").validate()
