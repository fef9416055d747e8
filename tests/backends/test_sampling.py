"""The batched device sampler (backends/sampling.py) on fixed logits, without a model: draws follow
softmax(logits / T), top-p keeps only the nucleus, greedy is the argmax, and a row's draw is the
same whatever other rows share its batch."""

from __future__ import annotations

from typing import Any

import pytest

# Importing torch takes seconds, and collection imports every test module, even one deselected:
# torch and the sampler are imported by the fixture below, when a test of this file runs. The file
# is slow-marked with the transformers engine's other tests, so the Ray-free inner loop
# (-m "not ray and not slow") imports no torch; CI runs it.
pytestmark = pytest.mark.slow

torch: Any = None
nucleus: Any = None
row_keys: Any = None
sample_tokens: Any = None
uniforms: Any = None
LOGITS: Any = None
V = 8


@pytest.fixture(autouse=True, scope="module")
def _torch_and_sampler():
    global torch, nucleus, row_keys, sample_tokens, uniforms, LOGITS
    torch = pytest.importorskip("torch")
    from backends.sampling import nucleus, row_keys, sample_tokens, uniforms

    LOGITS = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, 0.3, 1.5, -0.5])
    assert len(LOGITS) == V


# chi-square critical values at p = 0.001 by degrees of freedom: a correct sampler fails this
# for one seed set in a thousand, and the draws below are fixed (hashed), so the test is too
CHI2_001 = {2: 13.82, 3: 16.27, 4: 18.47, 7: 24.32}


def draw(n: int, temperature: float, top_p: float | None, seed0: int = 0, position: int = 7) -> torch.Tensor:
    """n draws from LOGITS, one row per seed (seeds seed0 .. seed0 + n - 1), all at one position."""
    logits = LOGITS.repeat(n, 1)
    temp = torch.full((n,), temperature)
    tp = None if top_p is None else torch.full((n,), top_p)
    keys = row_keys(torch.arange(seed0, seed0 + n, dtype=torch.int64))
    return sample_tokens(logits, temp, tp, keys, torch.full((n,), position, dtype=torch.int64))


def chi_square(tokens: torch.Tensor, probs: torch.Tensor) -> tuple[float, int]:
    """Pearson's statistic of the token counts against probs, over the tokens probs allows."""
    counts = torch.bincount(tokens, minlength=len(probs)).double()
    allowed = probs > 0
    expected = len(tokens) * probs.double()
    stat = ((counts - expected)[allowed] ** 2 / expected[allowed]).sum()
    return float(stat), int(allowed.sum()) - 1


@pytest.mark.parametrize("temperature", [0.7, 1.0, 1.6])
def test_draws_follow_the_tempered_softmax(temperature):
    tokens = draw(20_000, temperature, None)
    stat, dof = chi_square(tokens, torch.softmax(LOGITS / temperature, dim=0))
    assert stat < CHI2_001[dof]


def test_draws_at_other_positions_of_one_seed_follow_it_too():
    n = 20_000
    keys = row_keys(torch.full((n,), 123456789, dtype=torch.int64))
    temp = torch.full((n,), 0.7)
    tokens = sample_tokens(LOGITS.repeat(n, 1), temp, None, keys, torch.arange(n, dtype=torch.int64))
    stat, dof = chi_square(tokens, torch.softmax(LOGITS / 0.7, dim=0))
    assert stat < CHI2_001[dof]


def test_top_p_keeps_the_nucleus_and_renormalises_inside_it():
    probs = torch.softmax(LOGITS / 0.7, dim=0)  # sorted: 0 (.49), 6 (.24), 1 (.12), 2 (.06), ...
    tokens = draw(20_000, 0.7, 0.8)
    # mass before token 1 is .73 < .8, so it stays (the token that crosses top_p); token 2's is .85
    assert set(tokens.tolist()) == {0, 6, 1}
    inside = torch.zeros(V)
    inside[[0, 6, 1]] = probs[[0, 6, 1]]
    stat, dof = chi_square(tokens, inside / inside.sum())
    assert stat < CHI2_001[dof]


def test_nucleus_edges():
    scaled = (LOGITS / 0.7).repeat(3, 1)
    keep = nucleus(scaled, torch.tensor([1e-6, 0.8, 1.0]))
    assert keep[0].nonzero().flatten().tolist() == [0]  # top_p near 0: the top token alone
    assert sorted(keep[1].nonzero().flatten().tolist()) == [0, 1, 6]
    assert bool(keep[2].all())  # top_p 1 keeps everything


def test_greedy_rows_take_the_argmax_whatever_their_top_p_and_seed():
    logits = torch.randn(6, 50, generator=torch.Generator().manual_seed(0))
    temp = torch.tensor([0.0, 0.0, -1.0, 0.0, 0.0, 0.0])
    top_p = torch.tensor([1.0, 0.5, 0.9, 0.1, 1.0, 0.3])
    keys = row_keys(torch.arange(6, dtype=torch.int64) * 977)
    out = sample_tokens(logits, temp, top_p, keys, torch.arange(6, dtype=torch.int64) + 40)
    assert out.tolist() == logits.argmax(dim=-1).tolist()


def test_a_rows_draw_does_not_depend_on_its_company():
    gen = torch.Generator().manual_seed(1)
    vocab = 300
    row = torch.randn(vocab, generator=gen)
    knobs = (0.8, 0.9, 2**62 + 17, 55)  # temperature, top_p, seed (above 32 bits), position

    def batch(others: int, at: int) -> int:
        n = others + 1
        logits = torch.randn(n, vocab, generator=gen) * 3
        temp = torch.rand(n, generator=gen) * 1.5  # some rows near greedy
        temp[0] = 0.0
        top_p = torch.rand(n, generator=gen)
        seeds = torch.randint(0, 2**62, (n,), generator=gen)
        pos = torch.randint(0, 4000, (n,), generator=gen)
        logits[at], temp[at], top_p[at], seeds[at], pos[at] = row, knobs[0], knobs[1], knobs[2], knobs[3]
        return int(sample_tokens(logits, temp, top_p, row_keys(seeds), pos)[at])

    alone = batch(0, 0)
    assert all(batch(others, at) == alone for others, at in [(1, 1), (7, 3), (31, 30), (63, 0)])
    # ... and the draw does change with the seed or the position
    draws = set()
    for seed in range(40):
        keys = row_keys(torch.tensor([seed], dtype=torch.int64))
        draws.add(int(sample_tokens(row[None], torch.tensor([0.8]), None, keys, torch.tensor([55]))[0]))
    assert len(draws) > 10


def test_uniforms_are_in_the_open_interval_and_even():
    keys = row_keys(torch.arange(64, dtype=torch.int64))
    u = uniforms(keys, torch.arange(64, dtype=torch.int64) * 3, 4096)
    assert float(u.min()) > 0 and float(u.max()) < 1
    assert u.dtype == torch.float32 and u.shape == (64, 4096)
    share = torch.histc(u, bins=16, min=0, max=1) / u.numel()
    assert torch.allclose(share, torch.full((16,), 1 / 16), atol=0.002)
    assert not torch.equal(uniforms(keys, keys * 0, 64), uniforms(keys, keys * 0 + 1, 64))  # the position counts
