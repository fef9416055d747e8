"""The closed-form cost model against measured runs on the SIMULATED backend.

Tolerance: MAD, sparse, CoT and CoT-SC are checked EXACTLY (0 tokens): the simulated backend
counts whitespace tokens plus a fixed framing, so every piece of a prompt adds up exactly and the
formulas have nothing to approximate. ProbMAD is an expectation over random peer draws, so its
measured total over 30 questions must be within 5% of the prediction (the observed spread of the
draw, not a modelling error).
"""

import pytest

from actors.backend_simulated import SimulatedBackend, count_tokens
from actors.local_run import run_local
from engine import cost_model
from engine.config import RunConfig
from engine.prompts import PromptSet
from engine.tasks import arithmetic_questions

REPLY = 40


def words(text: str) -> int:
    return len(text.split())


@pytest.fixture(scope="module")
def sizes():
    return cost_model.measure(PromptSet.for_task("numeric"), words, count_tokens)


def measured(cfg, n_q=6):
    qs = arithmetic_questions(n_q, seed=3)
    rows = run_local(cfg, qs, SimulatedBackend(reply_tokens=REPLY, accuracy=0.5, follow=0.3))
    return qs, sum(r["prompt_tokens"] for r, _ in rows), sum(r["completion_tokens"] for r, _ in rows), sum(
        r["n_calls"] for r, _ in rows)


@pytest.mark.parametrize(
    "kw",
    [
        dict(protocol="mad", agents=6, rounds=3),
        dict(protocol="mad", agents=4, rounds=4, forgetting=True),
        dict(protocol="sparse", agents=6, rounds=3, density=0.4),
        dict(protocol="sparse", agents=6, rounds=4, density=0.8),
        dict(protocol="cot", agents=3, rounds=3),
        dict(protocol="sc", agents=5, rounds=2),
    ],
)
def test_exact_for_deterministic_topologies(sizes, kw):
    cfg = RunConfig(backend="simulated", **kw)
    qs, prompt, completion, calls = measured(cfg)
    q_tokens = words(qs[0].text)
    assert all(words(q.text) == q_tokens for q in qs)  # arithmetic questions have a fixed length
    pred = cost_model.predict(cfg.protocol, sizes, cfg.n_agents, cfg.n_rounds, q_tokens, REPLY, cfg.density,
                              cfg.forgetting)
    assert pred.prompt_tokens * len(qs) == prompt
    assert pred.completion_tokens * len(qs) == completion
    assert pred.calls * len(qs) == calls


def test_probmad_within_five_percent(sizes):
    cfg = RunConfig(backend="simulated", protocol="probmad", agents=6, rounds=3, density=0.4)
    qs, prompt, _, _ = measured(cfg, n_q=30)
    pred = cost_model.predict("probmad", sizes, 6, 3, words(qs[0].text), REPLY, 0.4)
    assert abs(prompt - pred.prompt_tokens * len(qs)) / prompt < 0.05


def test_sparse_saving_grows_with_reply_length(sizes):
    def saving(c):
        mad = cost_model.predict("mad", sizes, 6, 3, 25, c)
        sp = cost_model.predict("sparse", sizes, 6, 3, 25, c, density=0.4)
        return 1 - sp.prompt_tokens / mad.prompt_tokens

    assert saving(60) < saving(150) < saving(1000) < 0.6  # bounded by 1 - k/(N-1) = 0.6
