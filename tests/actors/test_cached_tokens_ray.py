"""Cached prompt tokens through every hop of a real run on Ray: a backend's per-request count goes
replica -> agent actor -> coordinator -> writer -> the calls table, the question rows and the runs
row sum it over the calls that know it, and a reply reused from the first-round cache (no request
made) is unknown (null), not the original's count.

:class:`PrefixBackend` is made up here and registered for the test (as in
tests/backends/test_made_up_backend.py): a fixed reply, reporting the first half of every prompt as
served from a prefix cache.
"""

import pytest

from backends.base import Backend
from backends.registry import BackendSpec, register, unregister
from engine.config import RunConfig
from engine.messages import message_text
from engine.records import GenRequest, GenResult

NAME = "prefix-cached"


class PrefixBackend(Backend):
    """Answers 4 to everything; a token is a whitespace-split word; the first half of every prompt
    (rounded down) is reported as served from a prefix cache."""

    mode = "batch"

    def __init__(self, model: str) -> None:
        self.settings = {"model": model}

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """One reply per request, in order."""
        out = []
        for req in requests:
            prompt = sum(len(message_text(m).split()) for m in req.messages)
            out.append(GenResult("The answer is 4.", prompt, 4, 0.0, cached_prompt_tokens=prompt // 2))
        return out


@pytest.fixture
def prefix_backend():
    register(BackendSpec(NAME, PrefixBackend, summary="a fixed reply and a made-up prefix cache"))
    yield
    unregister(NAME)


@pytest.mark.ray
def test_cached_tokens_reach_the_tables_and_a_reused_reply_is_unknown(ray_local, prefix_backend, tmp_path):
    from actors.driver import run
    from engine.results import read_table

    cfg = RunConfig.flat(
        backend=NAME,
        protocol="mad",
        limit=2,
        agents=3,
        rounds=2,
        reuse_first_round=True,
        agent_settings=[{"seed": 5}, {"seed": 5}],  # agents 0 and 1 send the same first request
        progress=False,
        out=str(tmp_path),
    )
    result = run(cfg)
    calls = read_table(result.out_dir, "calls").to_pandas()
    assert len(calls) == 2 * 3 * 2 and calls.error.isna().all()
    reused, sent = calls[calls.reused], calls[~calls.reused]
    assert len(reused) == 2 and reused.cached_prompt_tokens.isna().all()  # one per question: no request made
    assert (sent.cached_prompt_tokens == sent.prompt_tokens // 2).all()
    questions = read_table(result.out_dir, "questions").to_pandas().set_index("question_id")
    assert questions.cached_prompt_tokens.to_dict() == sent.groupby("question_id").cached_prompt_tokens.sum().to_dict()
    cached, computed = (
        int(sent.cached_prompt_tokens.sum()),
        int((sent.prompt_tokens // 2 + sent.prompt_tokens % 2).sum()),
    )
    (runs_row,) = read_table(result.out_dir, "runs").to_pylist()
    assert (runs_row["cached_prompt_tokens"], runs_row["computed_prompt_tokens"]) == (cached, computed)
    assert runs_row["cached_prompt_share"] == pytest.approx(cached / int(sent.prompt_tokens.sum()))
    assert result.summary["cached_prompt_share"] == runs_row["cached_prompt_share"]
