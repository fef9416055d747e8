"""The cost model's computed prefill after a perfect prefix cache (``Cost.computed_prompt_tokens``,
engine/cost_model.py) against simulated runs: each run's stored prompts re-tokenized in the
simulated backend's layout (engine/word_tokens.py) and counted exactly (engine/prefix.py).

Tolerance: the prediction the planner makes for the run (:class:`engine.plan.Planner`, which adds
the per-run heads and the questions' own first prompts to the per-question closed form) must be
within 10% of the measured count, and where it says ``exact`` it is 0 tokens off (every piece is
whole whitespace words, and the simulated replies part at their first word as sampled ones do);
a ``bound`` is never below the measured count and is tight when no two answers ever agree."""

from __future__ import annotations

import pytest

from actors.local_run import run_local
from backends.simulated_backend import SimulatedBackend
from engine import cost_predict
from engine.config import RunConfig
from engine.plan import Planner
from engine.prefix import computed_prefill
from engine.prefix_runs import held_sequences
from engine.protocols.group_debate import GD_SYSTEM_PROMPT
from engine.protocols.s2mad import predict_s2mad, s2_decisions_from_records
from engine.tasks import arithmetic_questions
from engine.word_tokens import WordTokenizer

REPLY = 40


class NothingAgrees(SimulatedBackend):
    """The simulated model with a new answer in every reply (summaries too): S2-MAD never skips,
    deduplicates or stops early, so its bound is reached."""

    made = 0

    def _answer(self, req, rng):
        NothingAgrees.made += 1
        return str(1000 + NothingAgrees.made)


def measure(cfg: RunConfig, n_q: int = 2, backend=SimulatedBackend):
    """(questions, run rows, perfect-cache prefill of the run's stored prompts)."""
    qs = arithmetic_questions(n_q, seed=3)
    backends = {m: backend(reply_tokens=REPLY, accuracy=0.5, follow=0.3) for m in cfg.run_models()}
    rows = run_local(cfg, qs, backends)
    texts = {key: text for _, log in rows for key, text in log.messages.items()}
    records = [rec for _, log in rows for rec in log.records]
    tokens = WordTokenizer()
    messages = [[{"role": texts[k][0], "content": texts[k][1]} for k in rec.prompt] for rec in records]
    ids = [tokens(m) for m in messages]
    assert [len(x) for x in ids] == [rec.prompt_tokens for rec in records]  # the backend's own count
    held = held_sequences(tokens, messages, [rec.text for rec in records], ids)
    return qs, rows, sum(computed_prefill(ids, [rec.model for rec in records], held))


def planned(**kw):
    cfg = RunConfig.flat(backend="simulated", sim_reply_tokens=REPLY, **kw).validate()
    return cfg, Planner()


EXACT = [
    dict(protocol="cot"),
    dict(protocol="sc", agents=4),
    dict(protocol="mad", agents=3, rounds=3),
    dict(protocol="mad", agents=4, rounds=3, memory="last"),
    dict(protocol="mad", agents=4, rounds=3, memory="summary"),
    dict(protocol="mad", agents=4, rounds=4, memory="summary-last", system_prompt="Be brief and exact."),
    dict(protocol="mad", agents=3, rounds=3, talk="one-by-one", memory="summary"),
    dict(protocol="mad", agents=3, rounds=3, models="big*1,small*2"),
    dict(protocol="mad", agents=1, rounds=3),  # one agent reads nobody: it self-checks
    dict(protocol="sparse", agents=6, rounds=3, density=0.4),
    dict(protocol="group", agents=4, rounds=4, groups="2+2"),
    dict(protocol="group", agents=5, rounds=5, groups="1+4"),
    dict(protocol="group", agents=6, rounds=6, groups="2+2+2", stage_rounds=3, memory="full"),
    dict(protocol="group", agents=3, rounds=4, groups="1", system_prompt=GD_SYSTEM_PROMPT),
    dict(protocol="mad", agents=4, rounds=3, prompt_layout="shared"),
    dict(protocol="mad", agents=5, rounds=4, memory="last", prompt_layout="shared"),
    dict(protocol="mad", agents=4, rounds=3, memory="summary", prompt_layout="shared"),
    dict(protocol="mad", agents=4, rounds=4, memory="summary-last", system_prompt="Be brief.", prompt_layout="shared"),
    dict(protocol="mad", agents=3, rounds=3, memory="summary", models="big*1,small*2", prompt_layout="shared"),
    dict(protocol="mad", agents=1, rounds=3, prompt_layout="shared"),
    dict(protocol="group", agents=4, rounds=4, groups="2+2", prompt_layout="shared"),
    dict(protocol="group", agents=5, rounds=5, groups="1+4", prompt_layout="shared"),
    dict(protocol="group", agents=6, rounds=6, groups="2+2+2", stage_rounds=3, memory="full", prompt_layout="shared"),
    dict(protocol="group", agents=6, rounds=5, groups="3+3", stage_rounds=1, memory="full", prompt_layout="shared"),
    dict(protocol="group", agents=3, rounds=4, groups="1", system_prompt=GD_SYSTEM_PROMPT, prompt_layout="shared"),
]


@pytest.mark.parametrize("kw", EXACT, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_exact_on_the_simulated_backend(kw):
    cfg, planner = planned(**kw)
    qs, rows, measured = measure(cfg)
    plan = planner.predict(cfg, qs)
    assert abs(plan.prompt - sum(row["prompt_tokens"] for row, _ in rows)) < 0.5  # the tokens sent, too
    assert plan.computed is not None and plan.computed_kind == "exact"
    error = (plan.computed - measured) / measured
    assert abs(plan.computed - measured) < 0.5, f"predicted {plan.computed:.1f}, measured {measured}: {error:+.2%}"
    assert plan.computed < plan.prompt  # the cache serves something in every run


def test_probmad_estimate_within_ten_percent():
    """ProbMAD reads a random draw of peers: the closed form is an expectation over the draws."""
    cfg, planner = planned(protocol="probmad", agents=6, rounds=3, density=0.4)
    qs, _, measured = measure(cfg, n_q=10)
    plan = planner.predict(cfg, qs)
    assert plan.computed is not None and plan.computed_kind == "estimate"
    error = (plan.computed - measured) / measured
    assert abs(error) < 0.10, f"predicted {plan.computed:.1f}, measured {measured}: {error:+.2%}"


@pytest.mark.parametrize(
    "kw",
    [
        dict(protocol="sparse", agents=6, rounds=3, density=0.4, memory="summary"),  # lists may share replies
        dict(protocol="s2mad", agents=4, rounds=4, groups="2+2"),  # agents skip, summaries dedup
        dict(protocol="s2mad", agents=5, rounds=5, groups="1+4", prompt_layout="shared"),
    ],
    ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()),
)
def test_bounds_hold(kw):
    cfg, planner = planned(**kw)
    qs, _, measured = measure(cfg)
    plan = planner.predict(cfg, qs)
    assert plan.computed is not None and plan.computed_kind == "bound"
    assert measured <= plan.computed, f"bound {plan.computed:.1f} < measured {measured}"


@pytest.mark.parametrize(
    "kw",
    [
        dict(protocol="s2mad", agents=4, rounds=4, groups="2+2"),
        dict(protocol="s2mad", agents=6, rounds=4, groups="3+3", filter=False),
        dict(protocol="s2mad", agents=4, rounds=4, groups="2+2", prompt_layout="shared"),
        dict(protocol="s2mad", agents=5, rounds=5, groups="1+4", prompt_layout="shared"),
    ],
)
def test_s2mad_bound_is_reached_when_nothing_agrees(kw):
    cfg, planner = planned(**kw)
    qs, _, measured = measure(cfg, n_q=2, backend=NothingAgrees)
    plan = planner.predict(cfg, qs)
    assert abs(plan.computed - measured) < 0.5, f"bound {plan.computed:.1f}, measured {measured}"


def test_s2mad_exact_given_the_runs_decisions(sizes):
    """Who spoke, how many views and summaries: predict_s2mad's computed prefill is then exact
    per question (round 0 charged whole to each question: the questions' shared head is added
    once per run, :func:`engine.cost_model.run_head`, less what they share beyond it)."""
    cfg, planner = planned(protocol="s2mad", agents=5, rounds=5, groups="2+3")
    qs, rows, measured = measure(cfg)
    q = len(qs[0].text.split())
    total = 0.0
    for row, log in rows:
        decisions = s2_decisions_from_records(log.records, 5, row["rounds_run"])
        total += predict_s2mad(sizes, 5, 5, q, REPLY, decisions).computed_prompt_tokens
    bound = planner.predict(cfg, qs)
    shared_heads = len(qs) * bound.per_question.computed_prompt_tokens - bound.computed  # what the planner adds
    assert abs(total - shared_heads - measured) < 0.5, f"predicted {total - shared_heads:.1f}, measured {measured}"


def test_shared_layout_computes_less_and_protocols_without_a_model_say_so(sizes):
    """The shared layout's point, in numbers: with full memory MAD's computed prefill falls to
    about one board and N short parts per round; the protocols without a closed form give None
    (the planner shows —)."""
    paper = cost_predict.predict("mad", sizes, 8, 4, 20, 200)
    shared = cost_predict.predict("mad", sizes, 8, 4, 20, 200, prompt_layout="shared")
    assert shared.computed_prompt_tokens < paper.computed_prompt_tokens / 2
    assert paper.computed_prompt_tokens < paper.prompt_tokens and shared.prompt_tokens < paper.prompt_tokens
    for protocol in ("cortex", "prd", "chateval", "reconcile"):
        assert cost_predict.predict(protocol, sizes, 4, 3, 20, 60).computed_prompt_tokens is None
