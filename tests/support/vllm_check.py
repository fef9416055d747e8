"""Run as a subprocess by tests/backends/test_vllm_backend.py (vLLM's engine spawns processes and holds
memory; a separate process releases all of it): exercises the real vLLM engine through the
project's VLLMBackend and prints one JSON line of facts to check."""

import asyncio
import json
import sys

from backends.vllm_backend import VLLMBackend
from engine.records import GenRequest


def template_ids(tokenizer, messages) -> list[int]:
    """Token ids of the chat as the tokenizer's chat template renders it for generation."""
    out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return list(out["input_ids"] if hasattr(out, "keys") else out)


QS = ["What is 17 + 25?", "Name a prime number above 90.", "Why is the sky blue?", "What is 7*8?"]


async def main() -> dict:
    # float32: seeded samples are then identical alone and batched (bf16 rounds with batch company);
    # max_batch 2: the in-flight bound (2 x max_num_seqs = 4) is reached by a burst of 10 requests
    b = VLLMBackend("smollm2-135m-instruct", dtype="float32", max_batch=2)
    reqs = [
        GenRequest(messages=[{"role": "user", "content": q}], temperature=0.7, max_tokens=48, seed=i)
        for i, q in enumerate(QS)
    ]
    together = await asyncio.gather(*(b.agenerate(r) for r in reqs))
    alone = [await b.agenerate(r) for r in reqs]
    greedy = await b.agenerate(
        GenRequest(messages=[{"role": "user", "content": "Name the capital of France."}], temperature=0, max_tokens=16)
    )
    burst = await asyncio.gather(
        *(b.agenerate(GenRequest(messages=[{"role": "user", "content": f"Say {i}."}], max_tokens=4)) for i in range(10))
    )
    too_long = await b.agenerate(GenRequest(messages=[{"role": "user", "content": "word " * 9000}], max_tokens=8))
    # the prefix cache: a prompt of several KV blocks sent twice; the second finds the first's blocks
    long = [{"role": "user", "content": "Count these words: " + " ".join(f"w{i}" for i in range(150))}]
    cold, warm = [await b.agenerate(GenRequest(messages=long, temperature=0, max_tokens=4)) for _ in range(2)]
    every = [*together, *alone, greedy, *burst, too_long, cold, warm]
    out = {
        "texts": [r.text for r in together],
        "same_alone_and_batched": [a.text == t.text for a, t in zip(alone, together)],
        "prompt_tokens": [r.prompt_tokens for r in together],
        # the tokenizer's own chat template, not the backend's counting (which the test checks)
        "tokenizer_counts": [len(template_ids(b.tokenizer, r.messages)) for r in reqs],
        "completion_tokens": [r.completion_tokens for r in together],
        "finish": [r.finish_reason for r in together],
        "errors": [r.error for r in together],
        "greedy": greedy.text,
        "too_long_error": too_long.error,
        "in_flight_max": b.stats["in_flight_max"],
        "burst_errors": [r.error for r in burst],
        "settings": b.settings,
        # each request's own count of prompt tokens served from the prefix cache, and the replica's sum
        "cached": [[r.cached_prompt_tokens, r.prompt_tokens, r.error is None] for r in every],
        "cached_stat": b.stats["cached_prompt_tokens"],
        "cold_warm": [[r.cached_prompt_tokens, r.prompt_tokens] for r in (cold, warm)],
    }
    b.shutdown()
    return out


if __name__ == "__main__":
    print("VLLM_CHECK " + json.dumps(asyncio.run(main())))
    sys.stdout.flush()
