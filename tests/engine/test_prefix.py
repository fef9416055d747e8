"""The perfect-prefix-cache prefill (engine/prefix.py): the exact function on token ids against a
brute-force count, the simulated backend's token layout (engine/word_tokens.py) and the run-folder
helper on a simulated run made in-process (no Ray, no model)."""

from __future__ import annotations

import random

import pytest

from engine.prefix import computed_prefill
from engine.prefix_runs import PrefixInputError, prefill_totals, run_prefill
from engine.word_tokens import WordTokenizer, count_tokens
from tests.support.result_dirs import simulated_run


def brute_force(prompts, models=None):
    """The definition, literally: each prompt less its longest common prefix with an earlier one."""
    models = models or [0] * len(prompts)
    out = []
    for i, p in enumerate(prompts):
        best = 0
        for j in range(i):
            if models[j] != models[i]:
                continue
            k = 0
            while k < min(len(p), len(prompts[j])) and p[k] == prompts[j][k]:
                k += 1
            best = max(best, k)
        out.append(len(p) - best)
    return out


def test_by_hand():
    """A first prompt is computed whole, a repeat not at all, an extension its new tail, a prompt
    that parts from two earlier ones at different depths the part after the deeper one."""
    prompts = [[1, 2, 3], [1, 2, 3], [1, 2, 3, 4, 5], [1, 2, 9], [1, 2, 3, 4, 6, 7], [], [8]]
    assert computed_prefill(prompts) == [3, 0, 2, 1, 2, 0, 1]


def test_models_have_their_own_caches():
    prompts = [[1, 2, 3], [1, 2, 3], [1, 2, 3, 4], [1, 2, 3, 4]]
    assert computed_prefill(prompts, ["a", "b", "a", "b"]) == [3, 3, 1, 1]
    with pytest.raises(ValueError, match="4 prompts but 3 models"):
        computed_prefill(prompts, ["a", "b", "a"])


@pytest.mark.parametrize("seed", range(6))
def test_equals_the_definition_on_random_prompt_families(seed):
    """Prompts grown from a few shared stems with a small vocabulary (so that sorted neighbours
    share prefixes of every length), duplicates included, in random order and over two models:
    per prompt exactly the brute-force count, and the total does not depend on the order."""
    rng = random.Random(seed)
    stems = [[rng.randrange(4) for _ in range(rng.randrange(0, 12))] for _ in range(5)]
    prompts = [rng.choice(stems) + [rng.randrange(3) for _ in range(rng.randrange(0, 10))] for _ in range(120)]
    prompts += rng.sample(prompts, 15)
    models = [rng.choice("xy") for _ in prompts]
    got = computed_prefill(prompts, models)
    assert got == brute_force(prompts, models)
    order = list(range(len(prompts)))
    rng.shuffle(order)
    shuffled = computed_prefill([prompts[i] for i in order], [models[i] for i in order])
    assert sum(shuffled) == sum(got)


def test_large_token_ids_and_bad_ids():
    top = 2**32 - 1
    assert computed_prefill([[top, 0], [top, 1], [top - 1]]) == [2, 1, 1]
    with pytest.raises(ValueError, match="prompt 1: token ids"):
        computed_prefill([[1], [2, -1]])
    with pytest.raises(ValueError, match="prompt 0: token ids"):
        computed_prefill([[2**32]])


# --------------------------------------------------------------------------- the simulated layout


def test_word_tokens_count_as_the_simulated_backend_counts():
    """As many ids as count_tokens counts, and a prompt followed by its reply and a new message
    begins with the whole earlier prompt (the generation prompt is an assistant header)."""
    tok = WordTokenizer()
    first = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 1+1?"}]
    later = first + [{"role": "assistant", "content": "It is 2."}, {"role": "user", "content": "Sure?"}]
    a, b = tok(first), tok(later)
    assert (len(a), len(b)) == (count_tokens(first), count_tokens(later))
    assert b[: len(a)] == a and len(b) - len(a) == 4 + 3 + 4 + 1  # the reply's message, then the new one
    assert tok([{"role": "user", "content": "a b"}]) != tok([{"role": "system", "content": "a b"}])


# --------------------------------------------------------------------------- a run folder


@pytest.fixture(scope="module")
def mad_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("mad")
    cfg = simulated_run(out, n_questions=3, protocol="mad", agents=3, rounds=3, memory="summary")
    return out, cfg


def test_run_prefill_of_a_simulated_run(mad_run):
    """Every call of the folder re-tokenized from the prompts table (as many tokens as the run
    counted), the perfect-cache prefill of the run's prompts in the order sent (here: the order
    the in-process run sent them), and the totals per run."""
    out, cfg = mad_run
    rows = run_prefill(out, WordTokenizer())
    from engine.results import load

    res = load(out)
    assert len(rows) == len(res.calls) == 3 * (3 * 3 + 2 * 3)  # 3 questions: 9 turns, 6 summaries
    assert rows["prompt_tokens"].tolist() == res.calls["prompt_tokens"].tolist()
    tok = WordTokenizer()
    ids = [tok(res.messages(call)) for call in res.calls.to_dict("records")]
    assert rows["computed"].tolist() == computed_prefill(ids)
    assert rows.groupby("question_id")["computed"].sum().min() > 0
    (total,) = prefill_totals(rows).to_dict("records")
    assert total["run_id"] == cfg.run_id() and total["calls"] == len(rows)
    assert 0 < total["computed"] < total["prompt_tokens"] == res.calls["prompt_tokens"].sum()
    assert total["cached_prompt_tokens"] != total["cached_prompt_tokens"]  # NaN: the simulated model cannot say


def test_run_prefill_without_stored_prompts(tmp_path):
    simulated_run(tmp_path, n_questions=1, protocol="cot", store_prompts=False)
    with pytest.raises(PrefixInputError, match="no call with a stored prompt"):
        run_prefill(tmp_path, WordTokenizer())
