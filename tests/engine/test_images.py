"""Questions with an image (the multimodal rows of the sparse-topology paper, MathVista): loading
(paths become data URLs, URLs are kept, one-line errors naming file:row), the messages (the image
once per request, in its first user message; transcripts and text-only requests unchanged), token
counting and truncation with content parts, vLLM's prompt path (with a fake renderer: no model),
the refusal of text-only backends and models before any call, and a SIMULATED run through Ray."""

from __future__ import annotations

import asyncio
import base64
import csv
import hashlib
import io
import json
import pickle
from pathlib import Path
from types import SimpleNamespace

import pytest

from actors.agent_actor import AgentCore
from actors.local_run import run_local
from actors.prepare import check_images, check_loaded_images, prepare
from backends.base import ImagesNotSupported
from backends.simulated_backend import SimulatedBackend, count_tokens
from engine.config import RunConfig
from engine.dataset_routing import load_questions
from engine.messages import has_images, text_only, truncate_oldest_turns, with_image
from engine.prompts import PromptSet, build_messages
from engine.protocols.base import SummaryCall
from engine.records import GenRequest, Turn
from engine.tasks import DatasetError, Question
from engine.tasks.files import load_dataset

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYPj/HwADAgH/eL9GtQAAAABJRU5ErkJggg=="
)
JPEG_HEAD = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 16  # a JPEG's first bytes are what we sniff


def data_url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def pics(tmp_path) -> Path:
    folder = tmp_path / "pics"
    folder.mkdir()
    (folder / "one.png").write_bytes(PNG)
    (folder / "photo.dat").write_bytes(JPEG_HEAD)  # no image extension: the type is sniffed
    (folder / "scan.tiff").write_bytes(b"II*\x00" + b"\x00" * 8)  # not sniffed: the extension says image/tiff
    (folder / "fake.png").write_bytes(b"not a png at all")
    (folder / "notes.txt").write_text("hello")
    (folder / "empty.png").write_bytes(b"")
    return folder


# --------------------------------------------------------------------------- loading
def test_paths_become_data_urls_and_urls_are_kept(tmp_path, pics):
    url = "https://example.org/figure.png"
    given = data_url(PNG, "image/png")
    rows = [
        {"id": "rel", "question": "q1", "answer": "1", "image": "pics/one.png"},  # relative to the file's folder
        {"id": "abs", "question": "q2", "answer": "2", "image_path": str(pics / "photo.dat")},
        {"id": "url", "question": "q3", "answer": "3", "image_url": url},
        {"id": "data", "question": "q4", "answer": "4", "image": given},
        {"id": "ext", "question": "q5", "answer": "5", "image": "pics/scan.tiff"},
        {"id": "none", "question": "q6", "answer": "6", "image": "  ", "subject": "x"},
    ]
    qs = load_dataset(jsonl(tmp_path / "data.jsonl", rows), "numeric")
    assert [q.image for q in qs] == [
        data_url(PNG, "image/png"),
        data_url(JPEG_HEAD, "image/jpeg"),
        url,
        given,
        data_url((pics / "scan.tiff").read_bytes(), "image/tiff"),
        None,
    ]
    assert all(not set(q.meta) & {"image", "image_path", "image_url"} for q in qs)  # never copied into meta
    assert qs[-1].meta == {"id": "none", "subject": "x"}
    # outputs get a short reference: the URL, or the sha256 of the image's bytes
    assert qs[0].image_ref == "sha256:" + hashlib.sha256(PNG).hexdigest()[:16]
    assert qs[2].image_ref == url and qs[-1].image_ref is None


def test_csv_and_a_fields_override_read_images_too(tmp_path, pics):
    path = tmp_path / "sheet.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["question", "answer", "picture", "image"])
        w.writerow(["q1", "1", "pics/one.png", "pics/notes.txt"])
        w.writerow(["q2", "2", "", ""])  # empty cells: no image
    qs = load_dataset(path, "numeric", fields={"image": "picture"})
    assert qs[0].image == data_url(PNG, "image/png") and qs[1].image is None
    assert "image" not in qs[0].meta  # the other image column is not meta either (it may be a long string)
    with pytest.raises(DatasetError) as err:  # without the override, "image" (a text file) is the image
        load_dataset(path, "numeric")
    assert str(err.value).startswith(f"{path}:2: image file 'pics/notes.txt' (field 'image') is not an image type")


def test_parquet_image_structs_and_bytes(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        {"question": "q1", "answer": "1", "image": {"bytes": PNG, "path": "one.png"}},
        {"question": "q2", "answer": "2", "image": {"bytes": None, "path": "pics/x.png"}},
    ]
    path = tmp_path / "imgs.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    [q] = load_dataset(path, "numeric", limit=1)
    assert q.image == data_url(PNG, "image/png")
    with pytest.raises(DatasetError, match=rf"^{path}:2: image file 'pics/x.png' \(field 'image'\): cannot read"):
        load_dataset(path, "numeric")


def test_a_pil_image_in_a_record_is_encoded_as_png():
    from PIL import Image

    from engine.tasks.files import questions_from_rows

    picture = Image.new("RGB", (3, 2), (10, 200, 30))
    [q] = questions_from_rows(
        [(0, 1, lambda: {"question": "q", "answer": "1", "image": picture})], "numeric", "mem", "mem"
    )
    head = "data:image/png;base64,"
    assert q.image.startswith(head)
    back = Image.open(io.BytesIO(base64.b64decode(q.image[len(head) :])))
    assert back.format == "PNG" and back.size == (3, 2) and back.getpixel((2, 1)) == (10, 200, 30)


@pytest.mark.parametrize(
    "value, fragment",
    [
        (
            "pics/missing.png",
            "image file 'pics/missing.png' (field 'image'): cannot read {pics}/missing.png: No such file or directory",
        ),
        ("pics", "image file 'pics' (field 'image'): cannot read {pics}: Is a directory"),
        ("pics/fake.png", "image file 'pics/fake.png' (field 'image') is not an image type we know"),
        ("pics/empty.png", "image file 'pics/empty.png' (field 'image') is empty"),
        ("ftp://host/x.png", "field 'image': unsupported URL 'ftp://host/x.png'"),
        ("data:text/plain;base64,aGk=", "field 'image' is a data URL that is not data:image/<type>;base64,..."),
        ("data:image/png;base64,@@@", "field 'image' is a data URL whose base64 does not decode"),
        (17, "field 'image' must be a file path, an http(s) URL or a data:image URL, got int"),
    ],
)
def test_a_bad_image_is_one_line_naming_file_and_row(tmp_path, pics, value, fragment):
    path = jsonl(
        tmp_path / "data.jsonl", [{"question": "fine", "answer": "1"}, {"question": "q", "answer": "2", "image": value}]
    )
    with pytest.raises(DatasetError) as err:
        load_questions(str(path), "numeric", None, 0)
    msg = str(err.value)
    assert msg.startswith(f"{path}:2: " + fragment.format(pics=pics)) and len(msg.splitlines()) == 1
    assert load_questions(str(path), "numeric", 1, 0)[0].image is None  # a row not selected is not read


def test_question_with_an_image_is_hashable_picklable_and_short_in_repr(tmp_path, pics):
    [q] = load_dataset(
        jsonl(tmp_path / "d.jsonl", [{"question": "q", "answer": "1", "image": "pics/one.png"}]), "numeric"
    )
    assert pickle.loads(pickle.dumps(q)) == q and pickle.loads(pickle.dumps(q)).image == q.image
    plain = Question(q.qid, q.task, q.text, q.gold, source=q.source, row=q.row, meta=q.meta)
    assert hash(q) == hash(plain) and q != plain  # the image is compared, but not hashed
    assert "base64" not in repr(q) and q.image[22:40] not in repr(q)


def test_hf_mathvista_mapping_reads_free_form_numeric_rows_with_their_images(tmp_path):
    datasets = pytest.importorskip("datasets")
    folder = tmp_path / "MathVista"
    folder.mkdir()
    rows = {
        "pid": ["1", "2", "3", "4"],
        "question": ["How many bars?", "Which is larger?", "What is the area?", "List the values."],
        "image": ["images/1.jpg", "images/2.jpg", "images/3.jpg", "images/4.jpg"],  # paths inside the hub's zip
        "decoded_image": [
            {"bytes": PNG, "path": None},
            {"bytes": JPEG_HEAD, "path": None},
            {"bytes": JPEG_HEAD, "path": None},
            {"bytes": PNG, "path": None},
        ],
        "choices": [None, ["A", "B"], None, None],
        "unit": [None, None, "cm^2", None],
        "precision": [None, None, 1.0, None],
        "answer": ["4", "A", "2.5", "[1, 2]"],
        "question_type": ["free_form", "multi_choice", "free_form", "free_form"],
        "answer_type": ["integer", "text", "float", "list"],
        "query": ["Hint: ...", "Hint: ...", "Hint: ...", "Hint: ..."],
    }
    ds = datasets.Dataset.from_dict(rows).cast_column("decoded_image", datasets.Image())
    (folder / "data").mkdir()
    ds.to_parquet(str(folder / "data" / "testmini-00000-of-00001.parquet"))  # laid out as on the hub
    qs = load_questions(f"hf:{folder}:testmini", None, None, 0)
    assert [(q.qid, q.task, q.text, q.gold, q.row) for q in qs] == [
        ("1", "numeric", "How many bars?", "4", 1),
        ("3", "numeric", "What is the area?", "2.5", 3),
    ]
    assert qs[0].image == data_url(PNG, "image/png") and qs[1].image == data_url(JPEG_HEAD, "image/jpeg")
    assert qs[1].meta["unit"] == "cm^2" and "query" not in qs[1].meta and "decoded_image" not in qs[1].meta
    assert [q.qid for q in load_questions(f"hf:{folder}:testmini", None, 1, 0, offset=1)] == ["3"]


# --------------------------------------------------------------------------- messages
PIXEL = data_url(PNG, "image/png")
PROMPTS = PromptSet.for_task("numeric")
FIRST = PROMPTS.first("How many apples?")


def parts(text: str, url: str = PIXEL) -> list[dict]:
    return [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": url}}]


def test_the_image_goes_once_into_the_first_user_message_of_each_memory_mode():
    history = [
        {"role": "user", "content": FIRST},
        {"role": "assistant", "content": "a0"},
        {"role": "user", "content": "second prompt"},
        {"role": "assistant", "content": "a1"},
    ]
    new = PROMPTS.self_check("How many apples?")
    for memory, context in (("full", history), ("last", [history[0], history[-1]]), ("none", [])):
        msgs, user = build_messages(
            PROMPTS, "How many apples?", "self_check", history, [], system_prompt="S", memory=memory, image=PIXEL
        )
        plain, _ = build_messages(
            PROMPTS, "How many apples?", "self_check", history, [], system_prompt="S", memory=memory
        )
        first_user = 1  # after the system prompt: the round-0 prompt, or the new message when nothing is remembered
        assert msgs[first_user]["content"] == parts(plain[first_user]["content"]), memory
        assert sum(has_images([m]) for m in msgs) == 1 and text_only(msgs) == plain == [
            {"role": "system", "content": "S"},
            *context,
            {"role": "user", "content": new},
        ]
        assert user == {"role": "user", "content": new}  # what the transcript keeps: text
    assert history[0] == {"role": "user", "content": FIRST}  # the caller's history is never changed


def test_text_only_questions_give_exactly_the_messages_of_before():
    history = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": "a0"}]
    msgs, user = build_messages(PROMPTS, "How many apples?", "debate", history, [(1, "peer text")], system_prompt="S")
    assert with_image(msgs, None) is msgs and text_only(msgs) is msgs
    assert json.dumps(msgs) == json.dumps(
        [
            {"role": "system", "content": "S"},
            *history,
            {"role": "user", "content": PROMPTS.debate("How many apples?", [(1, "peer text")])},
        ]
    )


def test_summary_calls_carry_the_image_in_their_one_user_message():
    from engine.protocols import get_protocol

    get_protocol("group")  # registers the summary stage
    agent = AgentCore(
        0,
        RunConfig.flat(backend="simulated", protocol="group", agents=4, groups="2+2").agent_specs()[0],
        PromptSet.for_task("numeric"),
        simulated=True,
    )
    q = Question("q", "numeric", "How many apples?", "3", image=PIXEL)
    req, user = agent.request(Turn(q, SummaryCall(group=0, texts=["x", "y"], stage="gd_summary"), round=1, key=5))
    [msg] = req.messages
    assert (
        user is None
        and msg["role"] == "user"
        and msg["content"][1] == {"type": "image_url", "image_url": {"url": PIXEL}}
    )
    plain, _ = agent.request(
        Turn(
            Question("q", "numeric", "How many apples?", "3"),
            SummaryCall(group=0, texts=["x", "y"], stage="gd_summary"),
            round=1,
            key=5,
        )
    )
    assert plain.messages == text_only(req.messages) and isinstance(plain.messages[0]["content"], str)


def _recorded_run(cfg: RunConfig, questions: list[Question]):
    """run_local with a SIMULATED backend that records every request it answers."""
    seen: list[GenRequest] = []

    class Recording(SimulatedBackend):
        def generate(self, requests):
            seen.extend(requests)
            return super().generate(requests)

    rows = run_local(cfg, questions, Recording(), similarity=lambda texts: [[1.0] * len(texts) for _ in texts])
    return rows, seen


@pytest.mark.parametrize(
    "cfg",
    [
        RunConfig.flat(backend="simulated", protocol="mad", agents=3, rounds=3),  # full memory
        RunConfig.flat(
            backend="simulated", protocol="group", agents=4, rounds=4, groups="2+2"
        ),  # summaries, memory "last"
        RunConfig.flat(
            backend="simulated", protocol="cortex", agents=4, rounds=3
        ),  # memory "none": no round-0 prompt sent
    ],
    ids=["mad", "group", "cortex"],
)
def test_every_request_of_a_debate_has_the_image_once_and_otherwise_the_text_only_request(cfg):
    image_q = Question("q", "numeric", "How many apples?", "3", image=PIXEL)
    text_q = Question("q", "numeric", "How many apples?", "3")
    image_rows, with_img = _recorded_run(cfg, [image_q])
    text_rows, without = _recorded_run(cfg, [text_q])
    assert len(with_img) == len(without) > cfg.n_agents
    for a, b in zip(with_img, without):
        first_user = next(i for i, m in enumerate(a.messages) if m["role"] == "user")
        assert a.messages[first_user]["content"][1] == {"type": "image_url", "image_url": {"url": PIXEL}}
        assert [has_images([m]) for m in a.messages].count(True) == 1
        assert text_only(a.messages) == b.messages and all(isinstance(m["content"], str) for m in b.messages)
        assert (a.seed, a.temperature, a.max_tokens, a.meta) == (b.seed, b.temperature, b.max_tokens, b.meta)
    # the image costs 0 SIMULATED tokens: the same rows, token counts included
    strip = lambda rows: [{k: v for k, v in r.items() if k not in ("image", "wall_s")} for r, _ in rows]  # noqa: E731
    assert strip(image_rows) == strip(text_rows)
    assert (
        image_rows[0][0]["image"] == "sha256:" + hashlib.sha256(PNG).hexdigest()[:16]
        and text_rows[0][0]["image"] is None
    )
    if cfg.experiment.protocol == "group":
        assert any(len(r.messages) == 1 for r in with_img)  # the summary calls were among them


# --------------------------------------------------------------------------- counting and truncation
def test_token_counts_read_the_text_parts():
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": parts("one two three")}]
    assert count_tokens(msgs) == count_tokens(text_only(msgs)) == (2 + 4) + (3 + 4) + 3

    from backends.model_store import chat_token_ids

    seen = []

    class Tokenizer:
        def apply_chat_template(self, messages, add_generation_prompt, tokenize):
            seen.append(messages)
            return [len(m["content"].split()) for m in messages]

    assert chat_token_ids(Tokenizer(), msgs) == [2, 3]  # a text chat template never sees a content list
    assert seen[0][1] == {"role": "user", "content": "one two three"}


def words(msgs):
    return sum(
        len(m["content"].split())
        if isinstance(m["content"], str)
        else sum(len(p["text"].split()) for p in m["content"] if p["type"] == "text")
        for m in msgs
    )


def test_truncation_keeps_the_image_when_the_first_turn_goes():
    msgs = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": parts("u0 " * 10)},
        {"role": "assistant", "content": "a0 " * 10},
        {"role": "user", "content": "u1 " * 10},
        {"role": "assistant", "content": "a1 " * 10},
        {"role": "user", "content": "now " * 5},
    ]
    out, dropped = truncate_oldest_turns(msgs, words, 30)  # 46 -> 26 by the middle turn: the image stays put
    assert dropped == 2 and out[1]["content"] == parts("u0 " * 10) and out[2:] == msgs[2:3] + msgs[5:]
    out, dropped = truncate_oldest_turns(msgs, words, 8)  # only system + current fit: the image moves to it
    assert dropped == 4 and out == [msgs[0], {"role": "user", "content": parts("now " * 5)}]
    assert msgs[5] == {"role": "user", "content": "now " * 5}  # the caller's messages are not changed


# --------------------------------------------------------------------------- vLLM's prompt (no model)
class _FakeTokenizer:
    def apply_chat_template(self, messages, add_generation_prompt, tokenize):
        assert all(isinstance(m["content"], str) for m in messages)
        return [7] * sum(len(m["content"].split()) for m in messages)


def _fake_vllm(limit: int, image_tokens: int):
    from backends.vllm_backend import VLLMBackend

    b = VLLMBackend.__new__(VLLMBackend)  # no engine: only the prompt path is exercised
    b.tokenizer, b.max_model_len, b.rendered = _FakeTokenizer(), limit, []

    async def render(messages):
        b.rendered.append(messages)
        text = len(b.encode(messages))
        return {"type": "multimodal", "prompt_token_ids": [1] * (text + image_tokens * has_images(messages))}

    b._render = render
    return b


def test_vllm_sends_text_requests_as_token_ids_and_renders_image_requests():
    b = _fake_vllm(limit=100, image_tokens=30)
    text = asyncio.run(b._prompt(GenRequest(messages=[{"role": "user", "content": "one two three"}])))
    assert (text.engine_input, text.tokens, text.error) == ({"prompt_token_ids": [7, 7, 7]}, 3, None) and not b.rendered
    msgs = [{"role": "user", "content": parts("one two three")}]
    image = asyncio.run(b._prompt(GenRequest(messages=msgs)))
    assert b.rendered == [msgs] and image.tokens == 3 + 30 and image.engine_input["type"] == "multimodal"


def test_vllm_counts_image_tokens_against_the_context_and_keeps_the_image_when_truncating():
    msgs = [
        {"role": "user", "content": parts("u0 " * 10)},
        {"role": "assistant", "content": "a0 " * 10},
        {"role": "user", "content": "now " * 5},
    ]
    b = _fake_vllm(limit=40, image_tokens=30)  # 25 text + 30 image tokens do not fit 40
    err = asyncio.run(b._prompt(GenRequest(messages=msgs)))
    assert (
        err.engine_input is None
        and err.error == "prompt of 55 tokens exceeds the model context of 40 (--context-overflow error)"
    )
    fit = asyncio.run(b._prompt(GenRequest(messages=msgs, context_overflow="truncate")))
    assert fit.error is None and fit.dropped == 2 and fit.tokens == 5 + 30
    assert b.rendered[-1] == [{"role": "user", "content": parts("now " * 5)}]  # rendered again, image kept


def test_a_rerendered_prompt_that_still_does_not_fit_is_an_error_row_not_a_crash():
    """If vLLM's rendering of the truncated messages comes out longer than counted (a chat template
    that adds tokens around the image, say), the request is an error row: vLLM would raise on a
    prompt that leaves no room to generate (max_tokens < 1) and stop the run."""
    msgs = [
        {"role": "user", "content": parts("u0 " * 10)},
        {"role": "assistant", "content": "a0 " * 10},
        {"role": "user", "content": "now " * 5},
    ]
    b = _fake_vllm(limit=40, image_tokens=30)
    first = b._render

    async def longer_second_time(messages):
        out = await first(messages)
        if len(b.rendered) > 1:
            out["prompt_token_ids"] += [1] * 6  # 35 counted, 41 rendered
        return out

    b._render = longer_second_time
    res = asyncio.run(b._prompt(GenRequest(messages=msgs, context_overflow="truncate")))
    assert res.engine_input is None and res.tokens == 41 and res.dropped == 2
    assert res.error == (
        "prompt of 41 tokens (its image included, 2 messages dropped) leaves no room to generate "
        "in the model context of 40"
    )


def test_only_vllms_rendering_failure_is_the_requests_error_row():
    """An image vLLM cannot render is this request's error row; a failure of the engine's own
    counting around it (a bug) is not turned into one: it raises."""
    msgs = [{"role": "user", "content": parts("one two three")}]
    b = _fake_vllm(limit=100, image_tokens=30)

    async def cannot_decode(messages):
        raise ValueError("cannot identify image file")

    b._render = cannot_decode
    res = asyncio.run(b._prompt(GenRequest(messages=msgs)))
    assert (
        res.engine_input is None
        and res.error == "cannot render the request's image: ValueError: cannot identify image file"
    )
    b = _fake_vllm(limit=10, image_tokens=30)  # does not fit: the engine counts the text to truncate

    async def render(messages):
        return {"prompt_token_ids": [1] * 40}

    def broken_encode(messages):
        raise RuntimeError("a bug in counting")

    b._render, b.encode = render, broken_encode
    with pytest.raises(RuntimeError, match="a bug in counting"):
        asyncio.run(b._prompt(GenRequest(messages=msgs, context_overflow="truncate")))


def test_vllm_takes_images_only_when_its_model_config_is_multimodal():
    from backends.vllm_backend import VLLMBackend, model_takes_images

    assert model_takes_images(SimpleNamespace(is_multimodal_model=True)) is True
    assert model_takes_images(SimpleNamespace(is_multimodal_model=False)) is False
    assert model_takes_images(SimpleNamespace()) is False
    assert VLLMBackend.accepts_images  # the class can send images; each loaded instance says for its model


# --------------------------------------------------------------------------- refusal before any call
@pytest.fixture
def image_data(tmp_path, pics) -> Path:
    return jsonl(
        tmp_path / "vision.jsonl",
        [{"question": "How many?", "answer": "1", "image": "pics/one.png"}, {"question": "And here?", "answer": "2"}],
    )


def test_transformers_refuses_a_data_set_with_images_in_one_line(image_data):
    cfg = RunConfig.flat(backend="transformers", dataset=str(image_data))
    with pytest.raises(ImagesNotSupported) as err:
        prepare(cfg)
    assert str(err.value) == (
        f"--dataset {image_data}: 1 of the 2 questions carry an image and --backend transformers "
        f"sends text only; use --backend openai (a server with a vision model) or --backend vllm "
        f"with a multimodal model"
    )
    for backend in ("simulated", "openai", "vllm"):  # these can send images (vLLM: checked again once loaded)
        check_images(
            RunConfig.flat(backend=backend, dataset=str(image_data)),
            load_questions(str(image_data), "numeric", None, 0),
        )
    check_images(RunConfig.flat(backend="transformers"), [Question("q", "numeric", "t", "1")])  # text only: fine


def test_a_text_only_vllm_model_is_refused_after_loading_before_the_first_call(image_data, tmp_path, monkeypatch):
    """The replicas' info says whether the loaded model takes images (vLLM: the model config's
    is_multimodal_model); DebateRunner.run stops with one line naming the model before it writes or calls anything."""
    from actors import driver
    from actors.layout import ReplicaSet
    from backends import preflight

    infos = [{"model": "Qwen/Qwen2.5-0.5B-Instruct", "accepts_images": False, "simulated": False}]
    monkeypatch.setattr(preflight, "check_model", lambda model: None)  # no model files needed
    monkeypatch.setattr(driver.DebateRunner, "_writer_for", lambda self, cfg, out: None)  # write_run would fail on None
    monkeypatch.setattr(driver.DebateRunner, "replicas_for", lambda self, cfg, models: ReplicaSet({}, infos, {}))
    runner = driver.DebateRunner.__new__(driver.DebateRunner)  # no Ray: replicas and writer are the fakes above
    cfg = RunConfig.flat(
        backend="vllm",
        model="Qwen/Qwen2.5-0.5B-Instruct",
        dataset=str(image_data),
        out=str(tmp_path / "o"),
        progress=False,
    )
    with pytest.raises(ImagesNotSupported) as err:
        runner.run(cfg)
    assert str(err.value) == (
        f"--dataset {image_data}: its questions carry images and --model Qwen/Qwen2.5-0.5B-Instruct "
        f"takes no images (--backend vllm loaded it as a text-only model); use a multimodal (vision) "
        f"model or --backend openai with a server that serves one"
    )
    check_loaded_images(cfg, [Question("q", "numeric", "t", "1")], infos)  # text-only questions: no objection
    check_loaded_images(
        cfg, load_questions(str(image_data), "numeric", None, 0), [{**infos[0], "accepts_images": True}]
    )


# --------------------------------------------------------------------------- end to end on Ray
@pytest.mark.ray
def test_debate_run_with_images_on_the_simulated_backend_through_ray(image_data, tmp_path, capsys, ray_local):
    from app.cli import main
    from engine.results import read_table

    out = tmp_path / "run"
    code = main(
        [
            "run",
            "--backend",
            "simulated",
            "--dataset",
            str(image_data),
            "--task",
            "numeric",
            "--agents",
            "3",
            "--rounds",
            "2",
            "--no-progress",
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "SIMULATED" in printed.out
    questions = read_table(out, "questions").to_pylist()
    assert {q["question_id"]: q["image"] for q in questions} == {
        "vision-00000": "sha256:" + hashlib.sha256(PNG).hexdigest()[:16],
        "vision-00001": None,
    }
    calls = read_table(out, "calls").to_pylist()
    assert len(calls) == 2 * 3 * 2 and all(c["error"] is None for c in calls)
    # the same debate in-process: the image counted 0 tokens, so Ray's rows match token for token
    cfg = RunConfig.flat(backend="simulated", dataset=str(image_data), task="numeric", agents=3, rounds=2)
    local = run_local(cfg, load_questions(str(image_data), "numeric", None, 0), SimulatedBackend())
    assert sorted((r["question_id"], r["prompt_tokens"], r["completion_tokens"]) for r, _ in local) == sorted(
        (q["question_id"], q["prompt_tokens"], q["completion_tokens"]) for q in questions
    )
    base64_png = base64.b64encode(PNG).decode()[:40]
    assert not [p for p in out.rglob("*.parquet") if base64_png.encode() in p.read_bytes()]  # no output holds the image
