"""One question's peak KV tokens (engine/kv_budget.py) and the questions in flight they allow.

Tolerance of the estimate against a SIMULATED run (whitespace tokens, the backend's own counts):
MAD (full and last memory, with or without a system prompt) within 1% (the closed form is exact
there); GroupDebate within 5% (its summary calls are counted with the inter-group round that reads
them, an over-estimate of a few percent). The truth is the largest round's prompt and completion
tokens, the first call's prompt (round 0's, shared by every agent's prompt) counted once.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from actors.local_run import run_local
from backends.simulated_backend import SimulatedBackend
from backends.vllm_backend import kv_cache_tokens
from engine.config import RunConfig
from engine.kv_budget import (
    WORD_TOKENS,
    ModelCache,
    QuestionKV,
    estimate_for,
    in_flight_limit,
    plan_in_flight,
    question_kv,
)
from engine.tasks import arithmetic_questions

REPLY = 40


def _cfg(**kw) -> RunConfig:
    base = dict(backend="simulated", limit=1, progress=False, sim_reply_tokens=REPLY)
    return RunConfig.flat(**{**base, **kw}).validate()


def _true_peak(cfg: RunConfig) -> int:
    """The largest round's tokens in a simulated run of one question, the first prompt once."""
    qs = arithmetic_questions(1, seed=5)
    ((_, log),) = run_local(cfg, qs, SimulatedBackend(reply_tokens=REPLY))
    per_round: dict[int, int] = {}
    for r in log.records:
        per_round[r.round] = per_round.get(r.round, 0) + r.prompt_tokens + r.completion_tokens
    first = next(r.prompt_tokens for r in log.records if r.round == 0)
    return max(per_round.values()) - (cfg.n_agents - 1) * first


@pytest.mark.parametrize(
    "kw, tolerance",
    [
        (dict(protocol="mad", agents=3, rounds=3), 0.01),
        (dict(protocol="mad", agents=5, rounds=4, memory="last"), 0.01),
        (dict(protocol="mad", agents=3, rounds=2, system_prompt="You solve problems with care."), 0.01),
        (dict(protocol="group", agents=6, rounds=4), 0.05),
    ],
)
def test_the_paper_estimate_matches_a_simulated_run(kw, tolerance):
    cfg = _cfg(**kw)
    truth = _true_peak(cfg)
    kv = estimate_for(cfg, arithmetic_questions(1, seed=5))
    assert kv is not None and kv.how.startswith("largest round")
    assert abs(kv.tokens(cfg.n_agents) - truth) <= tolerance * truth, (kv, truth)


def test_the_shared_estimate_keeps_each_board_once(sizes):
    """Under ``--prompt-layout shared`` a MAD question holds its boards once, not once per agent:
    it grows about linearly with the agents where the paper layout grows quadratically."""

    def kv(n: int, layout: str, **options) -> float:
        out = question_kv("mad", sizes, n, 3, 20, REPLY, layout, **options)
        assert out is not None
        return out.tokens(n)

    assert kv(3, "shared") < kv(3, "paper")
    assert kv(12, "paper") / kv(3, "paper") > 8  # (12/3)^2 = 16, less the shared first prompt
    assert kv(12, "shared") / kv(3, "shared") < 4.5
    assert kv(6, "shared", memory="last") < kv(6, "shared")  # one board kept, not every round's
    group = question_kv("group", sizes, 6, 4, 20, REPLY, "shared")
    assert group is not None and group.how.startswith("shared") and group.tokens(6) < kv(6, "paper")


def test_other_protocols_count_every_token_and_uncovered_ones_have_none(sizes):
    from engine.cost_predict import predict

    kv = question_kv("prd", sizes, 3, 3, 20, REPLY)
    assert kv is not None and kv.shared == 0 and kv.how.startswith("every token")
    assert kv.tokens(3) == pytest.approx(predict("prd", sizes, 3, 3, 20, REPLY).total)
    assert question_kv("sparse", sizes, 6, 3, 20, REPLY, topology="ring") is None  # no closed form
    # S2-MAD has a shared layout but no board formula here: its (paper) upper bound
    assert question_kv("s2mad", sizes, 6, 3, 20, REPLY, "shared").how.startswith("every token")  # type: ignore[union-attr]


def test_a_real_tokenizer_counts_more_than_words_but_replies_as_they_are(sizes):
    from engine.word_tokens import count_words

    questions = arithmetic_questions(3, seed=1)
    sim = estimate_for(_cfg(protocol="mad", agents=3, rounds=2, sim_reply_tokens=64, max_tokens=64), questions)
    real = estimate_for(RunConfig.flat(backend="vllm", protocol="mad", agents=3, rounds=2, max_tokens=64), questions)
    q = sum(count_words(x.text) for x in questions) / 3
    words = question_kv("mad", sizes, 3, 2, q, 0)  # everything but the replies
    assert sim is not None and real is not None and words is not None
    # the same prompts; only what is not a reply is multiplied by WORD_TOKENS
    assert real.tokens(3) == pytest.approx(sim.tokens(3) + (WORD_TOKENS - 1) * words.tokens(3))
    assert sim.tokens(3) < real.tokens(3) < WORD_TOKENS * sim.tokens(3)


KV = QuestionKV(100.0, 450.0, "test")  # 100 tokens shared, 450 per agent


def _limit(max_q: int, *models: ModelCache, kv: QuestionKV | None = KV):
    return in_flight_limit(max_q, list(models), kv)


def test_the_limit_is_what_the_kv_caches_hold_within_the_flag():
    # one question: 100 + 4 x 450 = 1,900 tokens; 2 replicas x 20,000 tokens hold 21 of them
    got = _limit(64, ModelCache("m", 2, 20_000, 4))
    assert got.limit == 21 and got.per_model == {"m": {"kv_question_tokens": 1900, "kv_questions": 21}}
    assert got.reason.startswith("21 questions in flight, not 64 (--max-concurrent-questions 64)")
    assert "2 replica(s) x 20,000 tokens" in got.reason
    assert _limit(8, ModelCache("m", 2, 20_000, 4)).limit == 8  # the flag is lower
    assert _limit(64, ModelCache("m", 1, 1_000, 4)).limit == 1  # not even one fits: still one
    # each model holds its own agents' share; the tightest model sets the limit
    two = _limit(64, ModelCache("big", 1, 10_000, 1), ModelCache("small", 3, 10_000, 4))
    assert two.per_model["big"]["kv_questions"] == 10_000 // 550 and two.per_model["small"]["kv_questions"] == 15
    assert two.limit == 15


def test_no_kv_cache_or_no_estimate_leaves_the_flag():
    none = _limit(64, ModelCache("m", 2, None, 4))
    assert none.limit == 64 and none.per_model == {} and "report no KV cache size" in none.reason
    blind = _limit(64, ModelCache("m", 2, 20_000, 4), kv=None)
    assert blind.limit == 64 and blind.per_model == {"m": {"kv_question_tokens": None, "kv_questions": None}}
    assert "no estimate" in blind.reason
    entries = blind.engine([{"model": "m", "dtype": "x"}, {"model": "other"}])
    assert entries == [
        {"model": "m", "dtype": "x", "kv_question_tokens": None, "kv_questions": None, "questions_in_flight": 64},
        {"model": "other", "questions_in_flight": 64},
    ]


def test_a_run_s_limit_from_its_config_and_replicas():
    cfg = _cfg(protocol="mad", agents=3, rounds=3, max_concurrent_questions=50)
    questions = arithmetic_questions(4, seed=2)
    kv = estimate_for(cfg, questions)
    assert kv is not None
    got = plan_in_flight(cfg, questions, {cfg.sampling.model: (2, 10_000)})
    assert got.limit == 2 * 10_000 // round(kv.tokens(3))
    assert plan_in_flight(cfg, questions, {cfg.sampling.model: (2, None)}).limit == 50
    # --no-kv-in-flight: the flag alone, what the caches would hold still reported
    off = plan_in_flight(cfg.replace(kv_in_flight=False), questions, {cfg.sampling.model: (2, 10_000)})
    assert off.limit == 50 and off.per_model == got.per_model
    assert off.reason.startswith("50 questions in flight (--max-concurrent-questions 50; --no-kv-in-flight: ")


def test_vllm_reports_its_kv_cache_in_tokens():
    assert kv_cache_tokens(SimpleNamespace(kv_cache_size_tokens=12_345, num_gpu_blocks=10, block_size=32)) == 12_345
    assert kv_cache_tokens(SimpleNamespace(kv_cache_size_tokens=None, num_gpu_blocks=10, block_size=32)) == 320
    assert kv_cache_tokens(SimpleNamespace(num_gpu_blocks=None, block_size=32)) is None
