"""The prompts table: every call's messages stored once per distinct text, rebuilt exactly; off
with ``store_prompts``; old folders without it load with a note. Simulated model, the engine's
own driver (run_local) and the Parquet sink, no Ray."""

from __future__ import annotations

import shutil

import pytest

from actors.local_run import run_local
from backends.simulated_backend import SimulatedBackend
from engine.config import RunConfig
from engine.messages import MessageLedger, message_hash, stored_messages
from engine.results import ParquetSink, ResultsError, load, read_table
from engine.tasks import arithmetic_questions
from tests.support.result_dirs import config, full, write_run

SYSTEM = "You are a careful solver."


class Recording(SimulatedBackend):
    """The simulated model, keeping every request's messages in the order they came."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.sent: list[list[dict]] = []

    def generate(self, requests):
        self.sent += [[dict(m) for m in r.messages] for r in requests]
        return super().generate(requests)


def _run_and_store(tmp_path, **kw):
    """A run of ``kw`` on 2 questions, stored as the coordinator stores it (calls, graphs,
    questions, runs and the prompts rows of every result); returns (cfg, what was sent)."""
    cfg = RunConfig.flat(backend="simulated", limit=2, **kw).validate()
    backend = Recording(reply_tokens=12, accuracy=0.5, follow=0.3)
    rows = run_local(cfg, arithmetic_questions(2, seed=3), backend)
    labels = {"run_id": cfg.run_id(), "backend": "simulated", "simulated": True, "attempt": "a"}
    sink = ParquetSink(tmp_path, flush_rows=10**6, flush_seconds=10**6)
    for row, log in rows:
        sink.write("questions", [{**row, **labels}])
        sink.write("calls", [{**rec.to_row(), **labels} for rec in log.records])
        sink.write("graphs", [{**g, **labels} for g in log.graph_rows()])
        prompts = [{"message": k, "role": r, "content": c, **labels} for k, (r, c) in log.messages.items()]
        sink.write("prompts", prompts)
    sink.flush()
    sink.write_run({"run_id": cfg.run_id(), "status": "finished", "config": "{}"})
    return cfg, backend.sent


def test_every_call_rebuilds_to_exactly_the_messages_it_sent(tmp_path):
    _, sent = _run_and_store(tmp_path, protocol="mad", agents=3, rounds=3, system_prompt=SYSTEM)
    r = load(tmp_path)
    assert len(r.calls) == len(sent) == 2 * 3 * 3
    rebuilt = [r.messages(row) for _, row in r.calls.iterrows()]
    assert rebuilt == sent  # row order is call order; every role and text as sent
    assert all(len(m) == 2 * row["round"] + 2 for m, (_, row) in zip(rebuilt, r.calls.iterrows()))


def test_a_message_every_agent_sent_is_stored_once(tmp_path):
    cfg, sent = _run_and_store(tmp_path, protocol="mad", agents=4, rounds=2, system_prompt=SYSTEM)
    prompts = read_table(tmp_path, "prompts").to_pylist()
    keys = [p["message"] for p in prompts]
    assert len(keys) == len(set(keys))  # stored once each
    assert [p["content"] for p in prompts if p["role"] == "system"] == [SYSTEM]
    calls = read_table(tmp_path, "calls").to_pylist()
    assert {c["prompt"][0] for c in calls} == {message_hash("system", SYSTEM)}
    # the first question's message: the same for all 4 agents, one row; 8 distinct per question
    # otherwise (4 first answers quoted back as assistant messages, 4 debate messages) + the question
    first = {c["prompt"][1] for c in calls if c["question_id"] == calls[0]["question_id"]}
    assert len(first) == 1
    assert len(prompts) == 1 + 2 * (1 + 4 + 4)
    assert sum(len(m) for m in sent) == 2 * (4 * 2 + 4 * 4)  # 48 messages sent, 19 stored


def test_store_prompts_off_stores_none_and_keeps_the_run_id(tmp_path):
    cfg, _ = _run_and_store(tmp_path, protocol="mad", agents=2, rounds=2, store_prompts=False)
    assert cfg.run_id() == RunConfig.flat(backend="simulated", limit=2, protocol="mad", agents=2, rounds=2).run_id()
    r = load(tmp_path)
    assert r.prompts.empty and r.calls.prompt.isna().all() and len(r.calls) == 8
    with pytest.raises(ResultsError, match="stored without its prompt"):
        r.messages(r.calls.iloc[0])


def test_the_sink_and_load_keep_one_row_per_message(tmp_path):
    """The writer drops a message it already wrote in this run; load drops one another attempt
    (a resumed run, another sink) wrote again."""
    row = {"run_id": "r", "message": "k1", "role": "user", "content": "hi", "backend": "b", "simulated": True}
    first = ParquetSink(tmp_path, flush_rows=10**6, flush_seconds=10**6, name="one")
    first.write("prompts", [{**row, "attempt": "a"}, {**row, "attempt": "a"}])
    first.write("prompts", [{**row, "attempt": "a"}, {**row, "message": "k2", "attempt": "a"}])
    first.write("prompts", [{**row, "run_id": "s", "attempt": "a"}])  # another run: its own row
    first.flush()
    assert [(p["run_id"], p["message"]) for p in read_table(tmp_path, "prompts").to_pylist()] == [
        ("r", "k1"),
        ("r", "k2"),
        ("s", "k1"),
    ]
    second = ParquetSink(tmp_path, flush_rows=10**6, flush_seconds=10**6, name="two")
    second.write("prompts", [{**row, "attempt": "b"}])
    second.flush()
    write_run(second, "r", config("mad", 1, 1), [("q0", True, [1.0], False, 1, 0, full(1, 1, 5, 5))])
    assert len(read_table(tmp_path, "prompts")) == 4
    r = load(tmp_path)
    # run s has no runs or questions row: not loaded, like its other rows would not be
    assert sorted(zip(r.prompts.run_id, r.prompts.message)) == [("r", "k1"), ("r", "k2")]
    # a text sent twice in one prompt (the same self-check each round) is stored once, sent twice
    assert r.messages({"run_id": "r", "prompt": ["k2", "k1", "k2"]}) == [{"role": "user", "content": "hi"}] * 3
    with pytest.raises(ResultsError, match="k3 is not in the prompts table"):
        r.messages({"run_id": "r", "prompt": ["k1", "k3"]})


def test_an_old_folder_without_prompts_loads_with_a_note(tmp_path):
    sink = ParquetSink(tmp_path)
    write_run(sink, "old", config("mad", 2, 1), [("q0", True, [1.0], False, 1, 0, full(2, 1, 10, 5))])
    shutil.rmtree(tmp_path / "prompts")  # a folder written before the table existed
    r = load(tmp_path)
    assert r.prompts.empty and list(r.prompts.columns)[:3] == ["run_id", "message", "role"]
    assert any("no prompts table" in n for n in r.notes)
    assert r.calls.prompt.isna().all()
    with pytest.raises(ResultsError, match="stored without its prompt"):
        r.messages(r.calls.iloc[0])


def test_a_ledger_passes_each_text_on_once():
    keys, texts = stored_messages(
        [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": [{"type": "text", "text": "Q?"}, {"type": "image_url", "image_url": {}}]},
            {"role": "user", "content": "Q?"},
        ]
    )
    assert keys[1] == keys[2] == message_hash("user", "Q?") and len(texts) == 2  # image parts left out
    assert message_hash("user", SYSTEM) != message_hash("system", SYSTEM)  # the role is part of the key
    ledger = MessageLedger()
    assert ledger.new(texts) == texts
    assert ledger.new(texts) == {}
    assert ledger.new({"x": ("user", "new"), keys[0]: texts[keys[0]]}) == {"x": ("user", "new")}


def test_prompts_rows_are_checked_and_exported(tmp_path):
    from engine.results import SchemaError, export

    sink = ParquetSink(tmp_path / "run")
    with pytest.raises(SchemaError, match="missing \\['attempt', 'backend', 'content'"):
        sink.write("prompts", [{"run_id": "r", "message": "k", "role": "user"}])
    _run_and_store(tmp_path / "run2", protocol="mad", agents=2, rounds=2)
    got = export(tmp_path / "run2", tmp_path / "p.csv", table="prompts")
    lines = (tmp_path / "p.csv").read_text().splitlines()
    assert lines[0].startswith("run_id,message,role,content") and len(got.prompts) > 0
