"""scripts/bench_replica_loop.py without vLLM: its workloads, and that its modes run the prompt
fitting where they say (``loop`` on the event loop, as the code before the change did)."""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from pathlib import Path

import pytest

from engine.records import GenRequest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_replica_loop.py"
spec = importlib.util.spec_from_file_location("bench_replica_loop", SCRIPT)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_transcripts_are_an_agents_debate_prompt_with_its_peers_replies():
    msgs = bench.transcript(7, rounds=3, words=20)
    assert [m["role"] for m in msgs] == ["user", "assistant"] * 3 + ["user"]
    assert msgs[0]["content"].startswith(bench.transcript(7, rounds=0, words=20)[0]["content"][:30])
    assert all(len(m["content"].split()) == 20 + 4 for m in msgs[1::2])  # its own replies
    assert len(msgs[-1]["content"].split()) > 2 * 20  # the two peers' last replies
    assert bench.transcript(7, 3, 20) == msgs and bench.transcript(8, 3, 20) != msgs  # seeded


def test_a_burst_shares_its_transcript_but_each_request_ends_its_own_way():
    reqs = bench.case_requests("truncate", 4, rounds=2, words=10, overflow="truncate", max_tokens=8)
    assert len({r.seed for r in reqs}) == 4 and all(
        r.context_overflow == "truncate" and r.max_tokens == 8 for r in reqs
    )
    assert all(r.messages[:-1] == reqs[0].messages[:-1] for r in reqs)
    assert len({r.messages[-1]["content"] for r in reqs}) == 4
    other = bench.case_requests("fits", 1, rounds=2, words=10, overflow="error", max_tokens=8)[0]
    assert other.messages[0] != reqs[0].messages[0]  # each case its own debate


def test_percentile_and_the_per_repetition_ratios():
    assert bench.percentile([], 0.99) == 0.0 and bench.percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert bench.percentile([float(x) for x in range(1, 101)], 0.99) == 99.0

    def run(k, mode, wall, late):
        return {
            "repeat": k,
            "mode": mode,
            "wall_s": wall,
            "requests_per_s": 1.0,
            "late_max_ms": late,
            "late_p99_ms": late,
            "late_p50_ms": 0.1,
            "late_total_ms": late,
            "latency_p50_s": 1.0,
            "latency_max_s": 1.0,
            "fit_s": 0.5,
        }

    runs = [
        run(0, "loop", 4.0, 400.0),
        run(0, "thread", 2.0, 4.0),
        run(1, "loop", 3.0, 300.0),
        run(1, "thread", 3.0, 6.0),
        run(2, "loop", 6.0, 500.0),
        run(2, "thread", 5.0, 10.0),
    ]
    s = bench.summarise(runs, ("loop", "thread"))
    assert s["loop"]["wall_s"] == 4.0 and s["thread"]["late_max_ms"] == 6.0
    assert s["loop_over_thread"]["wall_s"] == 1.2 and s["loop_over_thread"]["late_max_ms"] == 50.0


class _Tokenizer:
    def __init__(self):
        self.threads: list[int] = []

    def apply_chat_template(self, messages, add_generation_prompt, tokenize):
        self.threads.append(threading.get_ident())
        return [7] * sum(len(m["content"].split()) for m in messages)


@pytest.mark.parametrize("mode", bench.MODES)
def test_each_mode_fits_where_it_says_and_sends_the_same_prompt(mode):
    from backends.vllm_backend import VLLMBackend

    b = VLLMBackend.__new__(VLLMBackend)  # no engine: only the prompt path
    b.tokenizer, b.max_model_len = _Tokenizer(), 150  # 209 words: the middle turn goes
    modes = bench.Modes(b)
    req = GenRequest(messages=bench.transcript(1, rounds=2, words=5), context_overflow="truncate")

    async def prompt():
        return await b._prompt(req), threading.get_ident()

    try:
        first, _ = asyncio.run(prompt())  # as shipped (the mode Modes starts in); remembered for "prefitted"
        b.tokenizer.threads.clear()
        modes.set(mode)
        again, loop_thread = asyncio.run(prompt())
        fitted_on = set(b.tokenizer.threads)
        fit_s = len(modes.fit_s)
    finally:
        modes.close()
        if b._tokenize_pool is not None:
            b._tokenize_pool.shutdown()
    assert (again.engine_input, again.tokens, again.dropped) == (first.engine_input, first.tokens, first.dropped)
    assert (first.dropped, first.tokens, first.error) == (2, 121, None)
    if mode == "loop":
        assert fitted_on == {loop_thread}  # the old path: on the event loop
    elif mode == "prefitted":
        assert fitted_on == set() and fit_s == 1  # only the first (shipped) fitting was timed
    else:
        assert fitted_on and loop_thread not in fitted_on and fit_s == 2
    assert "_off_loop" not in b.__dict__  # close() gives the instance its own method back
