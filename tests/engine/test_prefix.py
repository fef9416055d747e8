"""The perfect-prefix-cache prefill (engine/prefix.py): the exact function on token ids against a
brute-force count, the simulated backend's token layout (engine/word_tokens.py) and the run-folder
helper on a simulated run made in-process (no Ray, no model)."""

from __future__ import annotations

import random

import pytest

from engine.prefix import computed_prefill
from engine.prefix_runs import PrefixInputError, held_sequences, prefill_totals, run_prefill
from engine.word_tokens import WordTokenizer, count_tokens
from tests.support.result_dirs import simulated_run


def brute_force(prompts, models=None, held=None):
    """The definition, literally: each prompt less its longest common prefix with what an earlier
    call of its model holds (its prompt, or ``held[j]``)."""
    models = models or [0] * len(prompts)
    held = held or prompts
    out = []
    for i, p in enumerate(prompts):
        best = 0
        for j in range(i):
            if models[j] != models[i]:
                continue
            k = 0
            while k < min(len(p), len(held[j])) and p[k] == held[j][k]:
                k += 1
            best = max(best, k)
        out.append(len(p) - best)
    return out


def test_by_hand():
    """A first prompt is computed whole, a repeat not at all, an extension its new tail, a prompt
    that parts from two earlier ones at different depths the part after the deeper one."""
    prompts = [[1, 2, 3], [1, 2, 3], [1, 2, 3, 4, 5], [1, 2, 9], [1, 2, 3, 4, 6, 7], [], [8]]
    assert computed_prefill(prompts) == [3, 0, 2, 1, 2, 0, 1]


def test_an_earlier_reply_is_cached_after_its_prompt():
    """A call leaves its prompt AND its reply in the cache: the next prompt that repeats the reply
    after that prompt computes only what follows; a reply never serves a prompt that does not
    begin with the prompt it followed; ``None`` holds the prompt alone."""
    prompts = [[1, 2], [1, 2, 7, 8, 3], [1, 9, 7, 8], [1, 2, 7, 8, 4]]
    held = [[1, 2, 7, 8], None, [1, 9, 7, 8, 5], None]
    assert computed_prefill(prompts, held=held) == [2, 1, 3, 1]
    assert computed_prefill(prompts) == [2, 3, 3, 1]
    with pytest.raises(ValueError, match="4 prompts but 1 held sequences"):
        computed_prefill(prompts, held=[[1]])
    with pytest.raises(ValueError, match="held 0: token ids"):
        computed_prefill(prompts, held=[[-1], None, None, None])


def test_held_sequences_without_a_reply_or_a_template_that_extends():
    """An error row (no reply) holds its prompt alone; so does every call where the template does
    not render the prompt as the start of prompt + reply (here: one that drops assistant turns)."""
    msgs = [[{"role": "user", "content": "What is 1+1?"}]]
    tok = WordTokenizer()
    ids = [tok(msgs[0])]
    assert held_sequences(tok, msgs, [None], ids) == [None]
    assert held_sequences(tok, msgs, ["two"], ids)[0] == ids[0] + [tok.vocab["two"]]

    def drops_replies(messages):
        return [len(m["content"]) for m in messages if m["role"] != "assistant"] + [0]

    assert held_sequences(drops_replies, msgs, ["two"], [drops_replies(msgs[0])]) == [None]


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
    held = [p + [rng.randrange(4) for _ in range(rng.randrange(0, 6))] if rng.random() < 0.7 else None for p in prompts]
    full = [p if h is None else h for p, h in zip(prompts, held)]
    assert computed_prefill(prompts, models, held) == brute_force(prompts, models, full)
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
    messages = [res.messages(call) for call in res.calls.to_dict("records")]
    ids = [tok(m) for m in messages]
    held = held_sequences(tok, messages, res.calls["text"].tolist(), ids)
    # each call holds its prompt and then its reply's words, as many as the model generated
    assert [len(h) for h in held] == (res.calls["prompt_tokens"] + res.calls["completion_tokens"]).tolist()
    assert all(list(h[: len(p)]) == p for h, p in zip(held, ids))
    assert rows["computed"].tolist() == computed_prefill(ids, held=held)
    # an agent's later turn repeats its reply after its earlier prompt: the reply is served
    assert rows["computed"].sum() < sum(computed_prefill(ids))
    assert rows.groupby("question_id")["computed"].sum().min() > 0
    (total,) = prefill_totals(rows).to_dict("records")
    assert total["run_id"] == cfg.run_id() and total["calls"] == len(rows)
    assert 0 < total["computed"] < total["prompt_tokens"] == res.calls["prompt_tokens"].sum()
    assert total["cached_prompt_tokens"] != total["cached_prompt_tokens"]  # NaN: the simulated model cannot say


def test_run_prefill_without_stored_prompts(tmp_path):
    simulated_run(tmp_path, n_questions=1, protocol="cot", store_prompts=False)
    with pytest.raises(PrefixInputError, match="no call with a stored prompt"):
        run_prefill(tmp_path, WordTokenizer())
