"""The vLLM backend's result of a request from its final ``RequestOutput`` (no engine, no vLLM
import: a stand-in output with the attributes vLLM 0.32's has). The real engine's counts are
checked by tests/backends/test_vllm_backend.py (slow)."""

from types import SimpleNamespace

from backends.vllm_backend import final_result


def output(num_cached_tokens, finish_reason="stop"):
    """A final RequestOutput of a 40-token prompt and a 3-token completion."""
    completion = SimpleNamespace(text="  The answer is 4. ", token_ids=[5, 6, 7], finish_reason=finish_reason)
    return SimpleNamespace(prompt_token_ids=list(range(40)), outputs=[completion], num_cached_tokens=num_cached_tokens)


def test_a_result_carries_its_requests_own_cached_prompt_tokens():
    res = final_result(output(32), dropped=1, latency_s=0.5)
    assert (res.text, res.prompt_tokens, res.completion_tokens, res.finish_reason) == (
        "The answer is 4.",
        40,
        3,
        "stop",
    )
    assert (res.cached_prompt_tokens, res.truncated_messages, res.latency_s) == (32, 1, 0.5)
    assert final_result(output(0), 0, 0.0).cached_prompt_tokens == 0  # vLLM says no hit: a known 0


def test_an_output_that_does_not_say_gives_unknown_not_zero():
    assert final_result(output(None), 0, 0.0).cached_prompt_tokens is None
    no_field = output(None)
    del no_field.num_cached_tokens
    assert final_result(no_field, 0, 0.0).cached_prompt_tokens is None
