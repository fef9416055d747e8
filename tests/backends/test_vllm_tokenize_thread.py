"""The vLLM backend fits prompts off the event loop (no model, no vLLM engine: the prompt path only).

The chat template and the tokenisation (``encode``, ``fit_prompt``, ``fit_messages``; many encodes
when turns are dropped) must not run on the asyncio loop that also runs vLLM's output handling.
The fake tokenizer below blocks until a coroutine on the loop has run: on the loop thread that
can never happen (it times out), so a tokenisation on the loop fails these tests
deterministically, however loaded the machine is.
"""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest

from backends.model_store import fit_prompt
from engine.messages import has_images, text_only, with_image
from engine.records import GenRequest

WAIT_S = 2.0  # how long a blocked encode waits for the loop to tick before giving up


class _LoopWatchingTokenizer:
    """One token per word; each call waits until the event loop has ticked since the call began,
    and records its thread and whether the loop did tick meanwhile."""

    def __init__(self):
        self.calls: list[tuple[int, bool]] = []  # (thread id, the loop ran while this call waited)
        self.sizes: list[int] = []  # tokens of each call's prompt, in the order of the calls
        self.ticked = threading.Event()

    def apply_chat_template(self, messages, add_generation_prompt, tokenize):
        self.ticked.clear()
        ran = self.ticked.wait(WAIT_S)
        self.calls.append((threading.get_ident(), ran))
        self.sizes.append(sum(len(m["content"].split()) for m in messages))
        return [7] * self.sizes[-1]


@pytest.fixture
def make():
    """Builds backends with no engine (the prompt path only); their tokenizer threads are stopped after the test."""
    from backends.vllm_backend import VLLMBackend

    made = []

    def build(limit: int, image_tokens: int = 0):
        b = VLLMBackend.__new__(VLLMBackend)
        b.tokenizer, b.max_model_len = _LoopWatchingTokenizer(), limit

        async def render(messages):  # vLLM's renderer stand-in: counts words itself, not via the tokenizer
            words = sum(len(m["content"].split()) for m in text_only(messages))
            return {"type": "multimodal", "prompt_token_ids": [1] * (words + image_tokens * has_images(messages))}

        b._render = render
        made.append(b)
        return b

    yield build
    for b in made:
        if getattr(b, "_tokenize_pool", None) is not None:
            b._tokenize_pool.shutdown()


async def _prompt_while_ticking(b, req):
    """``b._prompt(req)`` with a coroutine on the same loop setting the tokenizer's event every
    millisecond; returns the prompt and the loop's thread id."""
    done = False

    async def tick():
        while not done:
            b.tokenizer.ticked.set()
            await asyncio.sleep(0.001)

    ticker = asyncio.create_task(tick())
    try:
        return await b._prompt(req), threading.get_ident()
    finally:
        done = True
        await ticker


def _conv(turns: int, words: int = 10):
    msgs = [{"role": "system", "content": "s"}]
    for k in range(turns):
        msgs += [{"role": "user", "content": f"u{k} " * words}, {"role": "assistant", "content": f"a{k} " * words}]
    return msgs + [{"role": "user", "content": "now " * 5}]


def test_text_prompts_are_tokenised_off_the_loop_while_it_keeps_running(make):
    b = make(limit=1000)
    req = GenRequest(messages=_conv(3))
    prompt, loop_thread = asyncio.run(_prompt_while_ticking(b, req))
    assert prompt.tokens == 66 and prompt.error is None and prompt.engine_input == {"prompt_token_ids": [7] * 66}
    [(thread, loop_ran)] = b.tokenizer.calls
    assert thread != loop_thread  # encoded in the tokenizer thread
    assert loop_ran  # the loop ran other coroutines while the request was being encoded


def test_truncation_recounts_off_the_loop_and_gives_the_same_prompt(make):
    """``--context-overflow truncate`` encodes once per candidate prompt: every one of them runs in
    the tokenizer thread, and the prompt is exactly what ``fit_prompt`` called directly gives."""
    b = make(limit=40)
    req = GenRequest(messages=_conv(4), context_overflow="truncate")
    prompt, loop_thread = asyncio.run(_prompt_while_ticking(b, req))
    calls = list(b.tokenizer.calls)
    # the whole prompt, its recount in fit_messages and in truncate_oldest_turns, 3 shorter ones, the result
    assert len(calls) == 7 and all(t != loop_thread and ran for t, ran in calls)
    assert len({t for t, _ in calls}) == 1  # one tokenizer thread serves every encode
    b.tokenizer.ticked.wait = lambda timeout=None: True  # the reference below runs with no loop to wait for
    ids, dropped, error = fit_prompt(b.encode, req, 40)
    assert (prompt.engine_input, prompt.tokens, prompt.dropped, prompt.error) == (
        {"prompt_token_ids": ids},
        len(ids),
        dropped,
        error,
    )
    assert dropped == 6 and error is None


def test_image_requests_count_their_text_off_the_loop(make):
    """An image request is rendered by vLLM on the loop (its async renderer); the engine's own
    counting of the text to drop turns around the image runs in the tokenizer thread."""
    b = make(limit=60, image_tokens=30)
    msgs = with_image(_conv(2), "data:image/png;base64,AAAA")
    prompt, loop_thread = asyncio.run(_prompt_while_ticking(b, GenRequest(messages=msgs, context_overflow="truncate")))
    assert prompt.error is None and prompt.dropped == 2 and prompt.tokens == 26 + 30
    assert b.tokenizer.calls and all(t != loop_thread and ran for t, ran in b.tokenizer.calls)


def test_concurrent_requests_share_one_tokenizer_thread_in_order_and_shutdown_stops_it(make):
    """One thread for every request, in the order they came (a fast tokenizer is not safe to
    share between threads), reused by later loops; ``shutdown()`` ends it."""
    import time

    b = make(limit=1000)
    b.tokenizer.ticked.wait = lambda timeout=None: time.sleep(0.02) or True  # busy a while; no loop watching
    b.engine, b._loop = SimpleNamespace(shutdown=lambda: None), None

    async def together(n):
        return await asyncio.gather(*(b._prompt(GenRequest(messages=_conv(k))) for k in range(n)))

    first = asyncio.run(together(4))
    asyncio.run(together(2))  # a later loop reuses the same thread
    assert [p.tokens for p in first] == [6 + 20 * k for k in range(4)]
    assert b.tokenizer.sizes[:4] == [6, 26, 46, 66]  # tokenised in the order the requests came
    [tid] = {t for t, _ in b.tokenizer.calls}
    assert len(b.tokenizer.calls) == 6 and tid != threading.get_ident()
    pool = b._tokenize_pool  # held here, so only shutdown() can end its thread (not garbage collection)
    b.shutdown()
    assert b._tokenize_pool is None and pool is not None
    assert not any(t.ident == tid and t.is_alive() for t in threading.enumerate())  # the thread has ended
