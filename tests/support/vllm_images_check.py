"""Run as a subprocess by tests/backends/test_vllm_images.py (vLLM's engine spawns processes and holds
memory; a separate process releases all of it): sends requests with and without an image to the
real vLLM engine, through the project's VLLMBackend, on the tiny vision model of tests/support/tiny_vlm.py,
and prints one JSON line of facts to check.

Usage: vllm_images_check.py VISION_MODEL_FOLDER TEXT_MODEL_FOLDER
"""

import asyncio
import base64
import io
import json
import sys
import time

from backends.vllm_backend import VLLMBackend, model_takes_images
from engine.messages import truncate_oldest_turns, with_image
from engine.records import GenRequest
from tests.support.tiny_vlm import IMAGE_TOKENS

MAX_LEN = 180  # small: the long transcript below fits as text, but not with its image
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
QUESTION = "How many apples are in the picture? Give your final answer as a number."
ANSWER = "The answer is 42. Think step by step."
PEERS = "These are the answers of the other agents. Using their reasoning, give an updated answer."


def png(rgb: tuple[int, int, int], size=(40, 30)) -> str:
    """A data URL of a one-colour PNG (not square: the processor resizes it to the model's 32x32)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, rgb).save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def text_model_takes_images(folder: str) -> bool:
    """vLLM's model config of a text-only model (no engine started): what VLLMBackend reads."""
    from vllm import AsyncEngineArgs

    return model_takes_images(AsyncEngineArgs(model=folder).create_model_config())


def image_ids(engine_input: dict | None, image_token_id: int) -> int:
    return sum(t == image_token_id for t in (engine_input or {}).get("prompt_token_ids", []))


async def call(b: VLLMBackend, req: GenRequest) -> dict:
    """A request's result, or the exception it raised (so a broken backend shows in the facts)."""
    try:
        res = await b.agenerate(req)
    except Exception as exc:
        return {"raised": f"{type(exc).__name__}: {exc}"[:500]}
    return {
        "text": res.text,
        "prompt_tokens": res.prompt_tokens,
        "completion_tokens": res.completion_tokens,
        "error": res.error,
        "truncated_messages": res.truncated_messages,
        "finish_reason": res.finish_reason,
    }


async def main(folder: str, text_folder: str) -> dict:
    facts: dict = {"text_model_accepts_images": text_model_takes_images(text_folder)}
    start = time.perf_counter()
    # the engine's own settings (dtype, chunked prefill, block size); a small KV cache starts faster
    b = VLLMBackend(folder, max_model_len=MAX_LEN, kv_cache_bytes=64 << 20)
    facts["load_s"] = round(time.perf_counter() - start, 1)
    facts["accepts_images"] = b.accepts_images
    facts["settings"] = b.settings
    image_token_id = b.engine.vllm_config.model_config.hf_config.image_token_id
    red, blue, green = png((230, 20, 20)), png((20, 20, 230)), png((20, 200, 20))

    plain_msgs = [SYSTEM, {"role": "user", "content": QUESTION}]
    image_msgs = with_image(plain_msgs, red)
    plain, image = await asyncio.gather(
        call(b, GenRequest(messages=plain_msgs, max_tokens=8, seed=1)),
        call(b, GenRequest(messages=image_msgs, max_tokens=8, seed=1)),
    )
    facts["plain"], facts["image"] = plain, image
    facts["tokenizer_count"] = b.count_prompt_tokens(plain_msgs)
    p_text, p_image = await b._prompt(GenRequest(messages=plain_msgs)), await b._prompt(GenRequest(messages=image_msgs))
    facts["text_input_keys"] = sorted(p_text.engine_input)
    facts["text_input_ids"] = p_text.engine_input["prompt_token_ids"] == b.encode(plain_msgs)
    facts["image_input_type"] = p_image.engine_input.get("type")
    facts["image_input_image_ids"] = image_ids(p_image.engine_input, image_token_id)
    facts["image_input_placeholders"] = [
        r.length for r in p_image.engine_input.get("mm_placeholders", {}).get("image", [])
    ]
    facts["image_input_tokens"] = p_image.tokens

    # the pixels reach the model: greedy replies to three colours, red twice (alone and batched)
    colour_reqs = [
        GenRequest(messages=with_image(plain_msgs, url), max_tokens=12, temperature=0.0)
        for url in (red, blue, green, red)
    ]
    facts["colour_texts"] = [r.get("text") for r in await asyncio.gather(*(call(b, r) for r in colour_reqs))]
    facts["red_alone"] = (await call(b, colour_reqs[0])).get("text")

    # an image vLLM cannot decode: that request's error row, and the engine goes on
    broken = await call(b, GenRequest(messages=with_image(plain_msgs, "data:image/png;base64,AAAA"), max_tokens=4))
    facts["broken_image_error"] = broken.get("error")
    facts["after_broken"] = await call(b, GenRequest(messages=image_msgs, max_tokens=4, seed=1))

    # a debate transcript too long for MAX_LEN once the image's tokens are counted
    long_plain = [SYSTEM, {"role": "user", "content": QUESTION}]
    for _ in range(3):
        long_plain += [{"role": "assistant", "content": ANSWER}, {"role": "user", "content": PEERS}]
    long_msgs = with_image(long_plain, red)
    img = IMAGE_TOKENS  # the processor's count (tests/backends/test_vllm_images.py checks it), not vLLM's
    facts["long_text_tokens"] = b.count_prompt_tokens(long_msgs)
    kept_img, dropped_img = truncate_oldest_turns(long_msgs, lambda m: len(b.encode(m)) + img, MAX_LEN)
    _, dropped_text = truncate_oldest_turns(long_msgs, lambda m: len(b.encode(m)), MAX_LEN)
    facts["expected_dropped"] = {"counting_the_image": dropped_img, "text_only": dropped_text}
    facts["expected_kept_tokens"] = len(b.encode(kept_img)) + img
    facts["too_long"] = await call(b, GenRequest(messages=long_msgs, max_tokens=8, seed=2))
    trunc_req = GenRequest(messages=long_msgs, max_tokens=8, seed=2, context_overflow="truncate")
    fit = await b._prompt(trunc_req)
    facts["truncated_prompt"] = {
        "dropped": fit.dropped,
        "tokens": fit.tokens,
        "error": fit.error,
        "image_ids": image_ids(fit.engine_input, image_token_id),
    }
    facts["truncated"] = await call(b, trunc_req)
    b.shutdown()
    return facts


if __name__ == "__main__":
    print("VLLM_IMAGES_CHECK " + json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
    sys.stdout.flush()
