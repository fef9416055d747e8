"""A backend made up here, in this one module plus one registry line, runs a real debate on Ray.

:class:`CountingBackend` is a tiny deterministic model: every reply gives as its answer the
number of messages it was sent. It is registered only in this (driver) process; the driver ships
its registry entry to the replica actors, this module pickled by value
(:func:`actors.replica_actor.shipped_backend`), so the Ray workers, which cannot import this file,
construct it all the same.
"""

import pytest

from backends.base import Backend
from backends.registry import BackendSpec, backend_choices, backend_spec, find_backend, register, unregister
from engine.config import RunConfig
from engine.messages import message_text
from engine.records import GenRequest, GenResult

NAME = "counting"


class CountingBackend(Backend):
    """Answers with the number of messages in the request; a token is a whitespace-split word."""

    mode = "batch"

    def __init__(self, model: str) -> None:
        self.model = model
        self.settings = {"model": model}

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """One reply per request, in order."""
        out = []
        for req in requests:
            n = len(req.messages)
            text = f"{self.model} read {n} messages. The answer is {n}."
            prompt = sum(len(message_text(m).split()) for m in req.messages)
            out.append(GenResult(text, prompt, len(text.split()), 0.0))
        return out


@pytest.fixture
def counting():
    """The made-up backend, registered for one test (the one registry line), removed after."""
    register(BackendSpec(NAME, CountingBackend, summary="answers with its message count"))
    yield backend_spec(NAME)
    unregister(NAME)


def test_a_registered_backend_is_a_choice_with_its_capabilities(counting):
    assert NAME in backend_choices() and find_backend(NAME) is counting
    assert not counting.loads_model and not counting.tensor_parallel and not counting.simulated
    cfg = RunConfig.flat(backend=NAME, limit=2).validate()
    assert cfg.sampling.backend == NAME and not cfg.simulated
    with pytest.raises(Exception, match="needs --backend vllm"):
        RunConfig.flat(backend=NAME, tensor_parallel=2).validate()


@pytest.mark.ray
def test_a_made_up_backend_runs_a_debate_on_ray(ray_local, counting, tmp_path):
    from actors.driver import run
    from engine.results import read_table

    cfg = RunConfig.flat(backend=NAME, protocol="mad", limit=3, agents=3, rounds=2, progress=False, out=str(tmp_path))
    result = run(cfg)
    calls = read_table(result.out_dir, "calls").to_pandas()
    assert result.backend == NAME and not result.simulated and result.replica_stats
    assert len(calls) == 18 and (calls.backend == NAME).all() and calls.error.isna().all()
    assert not calls.simulated.any()
    # the model's own rule, run in a Ray worker: its answer is the message count it was sent
    first, later = calls[calls["round"] == 0], calls[calls["round"] == 1]
    assert first.answer.nunique() == 1 and later.answer.nunique() == 1
    assert int(later.answer.iloc[0]) > int(first.answer.iloc[0])
    assert (calls.completion_tokens == calls.text.str.split().map(len)).all()


def test_the_builtin_entries_agree_with_their_classes():
    """An entry's capabilities are what the driver checks before any actor starts; the classes
    say the same (importing a backend's module loads no model)."""
    for name in ("vllm", "transformers", "openai", "simulated"):
        spec = backend_spec(name)
        cls = spec.load()
        assert spec.builtin and issubclass(cls, Backend), name
        assert (spec.accepts_images, spec.simulated, spec.loads_model) == (
            cls.accepts_images,
            cls.simulated,
            cls.loads_model_files,
        ), name
