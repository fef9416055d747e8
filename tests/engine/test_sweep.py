"""`debate sweep`: the sweep file, grid expansion, normalisation, manifest, resume (app/sweep.py);
the first-round cache (actors/cache_actor.py). Pure tests first (no Ray); the few Ray tests at the
end are marked ``ray``."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pyarrow.dataset as ds
import pytest
import yaml

from actors.cache_actor import ReplyCache, first_round_key
from app.cli import main
from app.sweep import (
    MANIFEST,
    SweepError,
    cell_dir_name,
    disk_status,
    expand,
    load_sweep,
    manifest,
    normalise,
    parse_sweep,
    run_sweep,
    sweep_command,
    unhashed_options,
    unused_options,
    write_manifest,
)
from backends.base import Backend
from engine.config import RunConfig
from engine.protocols.group_debate import GROUPS
from engine.protocols.mad import DENSITY, EDGES
from engine.protocols.s2mad import TAU
from engine.protocols.shared import FORGETTING
from engine.records import GenRequest, GenResult
from engine.results import ParquetSink, read_table
from tests.support.rows import complete_rows


def write_yaml(tmp_path: Path, data, name="sweep.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


BASE = {"backend": "simulated", "limit": 3, "agents": 4, "rounds": 2, "progress": False}


# ------------------------------------------------------------------------------------ expansion
def test_grid_is_the_cross_product_in_file_order(tmp_path):
    base = {k: v for k, v in BASE.items() if k != "agents"}
    spec = parse_sweep(
        {**base, "topology": "ring", "grid": {"protocol": ["mad", "sparse"], "agents": [4, 6], "seed": [1, 2]}},
        "s.yaml",
    )
    cells = expand(spec, tmp_path / "out")
    assert spec.n_points == 8 and len(cells) == 8
    assert [c.params for c in cells[:3]] == [
        {"protocol": "mad", "agents": 4, "seed": 1},
        {"protocol": "mad", "agents": 4, "seed": 2},  # the last key varies fastest
        {"protocol": "mad", "agents": 6, "seed": 1},
    ]
    assert [c.config.experiment.agents for c in cells] == [4, 4, 6, 6, 4, 4, 6, 6]
    assert [c.index for c in cells] == list(range(8))
    assert len({c.run_id for c in cells}) == 8
    assert all(c.status == "pending" and c.error is None for c in cells)
    # a sweep's cells reuse first rounds by default; the file can turn it off
    assert all(c.config.tuning.reuse_first_round for c in cells)
    off = expand(parse_sweep({**BASE, "reuse_first_round": False, "grid": {"seed": [1]}}), tmp_path)
    assert off[0].config.tuning.reuse_first_round is False


def test_no_grid_is_one_cell(tmp_path):
    cells = expand(parse_sweep({**BASE, "protocol": "mad"}), tmp_path)
    assert len(cells) == 1 and cells[0].params == {} and cells[0].label == cells[0].run_id


def test_options_a_protocol_does_not_use_do_not_duplicate_cells(tmp_path):
    spec = parse_sweep({**BASE, "agents": 6, "grid": {"protocol": ["mad", "sparse"], "density": [0.4, 0.8]}})
    cells = expand(spec, tmp_path)
    assert [(c.config.experiment.protocol, c.config.option(DENSITY), c.n_points) for c in cells] == [
        ("mad", None, 2),
        ("sparse", 0.4, 1),
        ("sparse", 0.8, 1),
    ]
    assert cells[0].params == {"protocol": "mad"}  # density is not listed for mad
    assert cells[1].params == {"protocol": "sparse", "density": 0.4}
    # cot: one agent, one round, whatever the grid says -> 1 cell for 2 x 2 points
    cot = expand(
        parse_sweep({"backend": "simulated", "protocol": "cot", "grid": {"agents": [3, 6], "rounds": [2, 3]}}), tmp_path
    )
    assert (
        len(cot) == 1
        and cot[0].n_points == 4
        and (cot[0].config.experiment.agents, cot[0].config.experiment.rounds) == (1, 1)
    )
    sc = expand(
        parse_sweep({"backend": "simulated", "protocol": "sc", "grid": {"agents": [3, 6], "rounds": [2, 3]}}), tmp_path
    )
    assert [(c.config.experiment.agents, c.config.experiment.rounds, c.n_points) for c in sc] == [(3, 1, 2), (6, 1, 2)]


@pytest.mark.parametrize(
    "cfg, unused_has, unused_lacks",
    [
        (dict(protocol="mad"), {"density", "groups", "tau", "cortex_memory", "center"}, {"forgetting", "agents"}),
        (dict(protocol="sparse", density=0.4, agents=6), {"center", "groups"}, {"density", "topology", "edges"}),
        (dict(protocol="sparse", topology="star", agents=6), {"groups"}, {"center", "density"}),
        (dict(protocol="probmad", density=0.5), {"topology", "edges", "center"}, {"density", "forgetting"}),
        (
            dict(protocol="group", groups="2"),
            {"forgetting", "density", "tau", "early_stop"},
            {"groups", "stage_rounds"},
        ),
        (dict(protocol="s2mad", groups="2"), {"tau", "embedding_model", "forgetting"}, {"similarity", "filter"}),
        (dict(protocol="s2mad", groups="2", similarity="embedding"), {"forgetting"}, {"tau", "embedding_model"}),
        (dict(protocol="cortex"), {"forgetting", "groups", "density"}, {"cortex_memory", "embedding_model"}),
        (dict(protocol="cortex", cortex_memory="full"), {"groups"}, {"forgetting"}),
    ],
)
def test_unused_options_per_protocol(cfg, unused_has, unused_lacks):
    unused = unused_options(RunConfig.flat(backend="simulated", **cfg))
    assert unused_has <= unused and not (unused_lacks & unused)
    # backend options: sim_* only on the simulated backend
    assert not any(n.startswith("sim_") for n in unused)
    assert {"sim_accuracy", "sim_latency_s"} <= unused_options(RunConfig.flat(backend="transformers", **cfg))


def test_normalise_resets_unused_options_to_defaults_and_keeps_the_rest():
    cfg = RunConfig.flat(
        protocol="group",
        groups="2",
        agents=4,
        forgetting=True,
        density=0.4,
        tau=0.9,
        sim_accuracy=0.9,
        backend="transformers",
        edges="0-1",
    )
    n = normalise(cfg)
    assert (n.option(FORGETTING), n.option(DENSITY), n.option(TAU), n.value("sim_accuracy"), n.option(EDGES)) == (
        False,
        None,
        0.4,
        0.6,
        None,
    )
    assert (n.option(GROUPS), n.experiment.agents, n.sampling.backend) == ("2", 4, "transformers")
    assert cfg.option(FORGETTING) is True  # the input is not modified
    used_all = RunConfig.flat(
        protocol="sparse", density=0.4, agents=6, forgetting=True, backend="simulated", sim_accuracy=0.9
    )
    assert normalise(used_all) == used_all


def test_invalid_cells_are_reported_and_skipped_not_fatal(tmp_path):
    spec = parse_sweep({**BASE, "grid": {"protocol": ["mad", "sparse", "probmad"], "density": [None, 0.5]}}, "g.yaml")
    cells = expand(spec, tmp_path)
    status = {(c.config.experiment.protocol, c.config.option(DENSITY)): (c.status, c.error) for c in cells}
    assert status[("mad", None)] == ("pending", None)
    st, err = status[("sparse", 0.5)]  # no regular graph of density 0.5 on 4 agents
    assert st == "invalid" and "--density 0.5" in err and "--agents 4" in err
    st, err = status[("sparse", None)]
    assert st == "invalid" and "--density" in err
    assert status[("probmad", 0.5)] == ("pending", None)
    assert status[("probmad", None)][0] == "invalid"
    assert len(cells) == 5  # mad once (density unused), sparse x2, probmad x2
    m = manifest(spec, cells, tmp_path)
    assert m["counts"] == {"pending": 2, "invalid": 3}
    assert sum(c["error"] is not None for c in m["cells"]) == 3


def test_all_invalid_is_an_error(tmp_path):
    spec = parse_sweep({**BASE, "protocol": "sparse", "grid": {"density": [0.5, 0.7]}}, "bad.yaml")
    with pytest.raises(SweepError, match=r"bad.yaml: no valid cell.*--density 0.5"):
        run_sweep(spec, tmp_path, runner=object(), echo=lambda s: None)


# ------------------------------------------------------------------------------------ file errors
@pytest.mark.parametrize(
    "data, needles",
    [
        ({"protocl": "mad"}, ["protocl", "did you mean 'protocol'"]),
        ({"grid": {"agnets": [3]}}, ["grid key 'agnets'", "did you mean 'agents'"]),
        ({"grid": {"seed": 1}}, ["grid key 'seed'", "must be a list", "seed: [1]"]),
        ({"grid": {"seed": []}}, ["grid key 'seed'", "empty list"]),
        ({"grid": [1, 2]}, ["grid must be a mapping"]),
        ({"grid": {"max_batch": [4, 8]}}, ["grid key 'max_batch'", "does not change results"]),
        ({"grid": {"reuse-first-round": [True, False]}}, ["grid key 'reuse-first-round'", "does not change results"]),
        ({"grid": {"out": ["a", "b"]}}, ["grid key 'out'", "does not change results"]),
        ({"seed": 1, "grid": {"seed": [1, 2]}}, ["'seed' is both a top-level option and a grid key"]),
        ({"max-tokens": 5, "max_tokens": 6}, ["'max_tokens' is given twice"]),
        ([1, 2], ["top level must be a mapping"]),
    ],
)
def test_bad_sweep_files_name_the_file_and_key(tmp_path, data, needles):
    path = write_yaml(tmp_path, data, "my-sweep.yaml")
    with pytest.raises(SweepError) as exc:
        load_sweep(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}: ")
    for needle in needles:
        assert needle in msg, msg


def test_missing_and_unparsable_files(tmp_path):
    with pytest.raises(SweepError, match="nope.yaml: no such sweep file"):
        load_sweep(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("grid: {protocol: [mad\n")
    with pytest.raises(SweepError, match="bad.yaml: not valid YAML"):
        load_sweep(bad)


def test_cli_sweep_errors_exit_2_and_list_runs_nothing(tmp_path, capsys):
    bad = write_yaml(tmp_path, {"grid": {"seed": 3}}, "bad.yaml")
    assert main(["sweep", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml" in err and "'seed'" in err
    good = write_yaml(tmp_path, {**BASE, "grid": {"protocol": ["mad", "sparse"], "density": [1.0, 0.5]}})
    assert main(["sweep", str(good)]) == 2 and "--out" in capsys.readouterr().err  # no sweep directory
    assert main(["sweep", str(good), "--out", str(tmp_path / "o"), "--list"]) == 0
    rows = [ln.split() for ln in capsys.readouterr().out.splitlines()]
    cells = [r for r in rows if len(r) > 2 and r[0].isdigit() and not r[1].startswith("question")]  # first lines
    assert [r[:2] for r in cells] == [["0", "pending"], ["1", "pending"], ["2", "invalid"]]
    assert not (tmp_path / "o").exists()  # --list writes nothing


# ------------------------------------------------------------------------------------ run ids
def test_run_ids_and_out_dirs_are_deterministic(tmp_path):
    data = {**BASE, "topology": "ring", "grid": {"protocol": ["mad", "sparse"], "seed": [1, 2]}}
    a = expand(parse_sweep(data), tmp_path / "out")
    b = expand(parse_sweep(json.loads(json.dumps(data))), tmp_path / "out")
    assert [c.run_id for c in a] == [c.run_id for c in b]
    assert all(c.out == tmp_path / "out" / cell_dir_name(c.config, c.run_id) for c in a)
    assert all(c.config.output.out == str(c.out) and c.out.name.endswith(c.run_id.split("-")[1]) for c in a)
    # the cell's run id is `debate run`'s for the same (normalised) options: reuse and out do not count
    by_hand = RunConfig.flat(backend="simulated", limit=3, agents=4, rounds=2, progress=False, protocol="mad", seed=2)
    assert a[1].run_id == by_hand.run_id()
    assert (
        a[3].run_id
        == RunConfig.flat(
            backend="simulated", limit=3, agents=4, rounds=2, protocol="sparse", seed=2, topology="ring"
        ).run_id()
    )
    assert a[0].run_id.startswith("mad-") and a[2].run_id.startswith("sparse-")


def test_an_auto_backend_cell_has_the_run_id_its_run_stores(tmp_path):
    """``backend: auto`` is resolved before the cell's id is made, as validate() resolves it for the
    run: the directory name and sweep.json's run_id are the id in the run's rows (joins work)."""
    cell = expand(parse_sweep({**BASE, "backend": "auto", "protocol": "mad"}), tmp_path / "out")[0]
    stored = RunConfig.flat(backend="auto", limit=3, agents=4, rounds=2, protocol="mad").validate()
    assert stored.sampling.backend != "auto" and cell.config.sampling.backend == stored.sampling.backend
    assert cell.run_id == stored.run_id() and cell.out.name == cell_dir_name(stored, stored.run_id())


def test_unhashed_options_really_do_not_change_the_run_id():
    knobs = unhashed_options()
    assert {"out", "reuse_first_round", "progress", "max_batch", "ray_address"} <= knobs
    assert not {"protocol", "seed", "density", "agents", "temperature", "sim_accuracy"} & knobs
    base = RunConfig().run_id()
    assert RunConfig.flat(reuse_first_round=True, out="x", max_batch=3).run_id() == base
    assert RunConfig.flat(seed=1).run_id() != base


# ------------------------------------------------------------------------------------ manifest / resume
class FakeEngine:
    """Writes what DebateRunner.run would (a finished run row, one question row per question)."""

    def __init__(self, fail_on: str | None = None, error: Exception | None = None, cached: int | None = 6):
        self.calls: list[str] = []
        self.fail_on = fail_on
        self.error = error
        self.cached = cached  # cached prompt tokens per question; None: the backend cannot say

    def run(self, cfg: RunConfig):
        from engine.tasks import DatasetError

        self.calls.append(cfg.run_id())
        if self.fail_on and self.fail_on == cfg.experiment.protocol:
            raise self.error or DatasetError(f"--dataset {cfg.experiment.dataset}: no such file")
        sink = ParquetSink(cfg.output.out)
        n = cfg.experiment.limit
        have = {r["question_id"] for r in read_table(cfg.output.out, "questions").to_pylist()}
        rows = [
            {
                "run_id": cfg.run_id(),
                "question_id": f"q{i}",
                "correct": i % 2 == 0,
                "prompt_tokens": 10,
                "completion_tokens": 5,
                "n_calls": 2,
            }
            for i in range(n)
            if f"q{i}" not in have
        ]
        sink.write("questions", complete_rows("questions", rows))
        sink.flush()
        cached = None if self.cached is None else self.cached * n
        sink.write_run(
            {
                "run_id": cfg.run_id(),
                "status": "finished",
                "n_questions": n,
                "accuracy": 0.5,
                "prompt_tokens": 10 * n,
                "completion_tokens": 5 * n,
                "cached_prompt_tokens": cached,
                "n_calls": 2 * n,
                "wall_s": 1.0,
            }
        )
        summary = {
            "n_questions": n,
            "accuracy": 0.5,
            "prompt_tokens": 10 * n,
            "completion_tokens": 5 * n,
            "cached_prompt_tokens": cached,
            "n_calls": 2 * n,
        }
        return SimpleNamespace(summary=summary, wall_s=0.1, resumed=n - len(rows))


def test_run_sweep_writes_manifest_and_resumes(tmp_path):
    spec = parse_sweep({**BASE, "limit": 4, "grid": {"protocol": ["mad", "sparse"], "density": [1.0, 0.5]}}, "s.yaml")
    out = tmp_path / "sweep"
    lines: list[str] = []
    eng = FakeEngine()
    cells = run_sweep(spec, out, runner=eng, echo=lines.append)
    assert [c.status for c in cells] == ["finished", "finished", "invalid"]
    assert eng.calls == [cells[0].run_id, cells[1].run_id]  # one engine for every cell, invalid skipped
    m = json.loads((out / MANIFEST).read_text())
    assert m["sweep_file"] == "s.yaml" and m["grid_points"] == 4 and m["n_cells"] == 3
    assert m["counts"] == {"finished": 2, "invalid": 1}
    c0 = m["cells"][0]
    assert (c0["run_id"], c0["dir"], c0["status"], c0["params"]) == (
        cells[0].run_id,
        cells[0].out.name,
        "finished",
        {"protocol": "mad"},
    )
    assert (c0["accuracy"], c0["tokens"], c0["n_questions"]) == (0.5, 60, 4)
    assert "--density 0.5" in m["cells"][2]["error"]
    assert (out / c0["dir"] / "questions").is_dir() and not cells[2].out.exists()
    assert not list(out.glob(".*.tmp"))
    assert any(ln.startswith("sweep: skipping invalid cell") for ln in lines)
    assert any(ln.startswith("[1/2] start") for ln in lines)
    done = [ln for ln in lines if " done " in ln]
    assert len(done) == 2 and "accuracy 0.500" in done[0] and "tokens 60" in done[0] and done[1].startswith("[2/2]")
    assert "24 of the prompt tokens cached" in done[0] and c0["cached_prompt_tokens"] == 24
    # same command again: everything finished, nothing is run
    again = FakeEngine()
    cells2 = run_sweep(spec, out, runner=again, echo=lines.append)
    assert again.calls == [] and [c.status for c in cells2] == ["finished", "finished", "invalid"]
    # a cell left half done (run row "running", 1 of 4 questions) is resumed, the other skipped
    cell = cells[1]
    for t in ("questions", "runs"):
        for f in (cell.out / t).glob("*.parquet"):
            f.unlink()
    sink = ParquetSink(cell.out)
    sink.write("questions", complete_rows("questions", [{"run_id": cell.run_id, "question_id": "q0"}]))
    sink.flush()
    sink.write_run({"run_id": cell.run_id, "status": "running", "n_questions": 4})
    assert disk_status(cell) == ("partial", {"questions_done": 1})
    third = FakeEngine()
    cells3 = run_sweep(spec, out, runner=third, echo=lines.append)
    assert third.calls == [cell.run_id] and cells3[1].status == "finished"
    assert cells3[0].result["cached_prompt_tokens"] == 24  # read back from the runs row on disk
    q = read_table(cell.out, "questions").to_pandas()
    assert sorted(q.question_id) == ["q0", "q1", "q2", "q3"]  # each question once
    assert any("(resuming)" in ln for ln in lines)


def test_a_cell_whose_backend_cannot_count_cached_tokens_says_nothing_of_them(tmp_path):
    spec = parse_sweep({**BASE, "limit": 2})
    lines: list[str] = []
    (cell,) = run_sweep(spec, tmp_path, runner=FakeEngine(cached=None), echo=lines.append)
    assert cell.result["cached_prompt_tokens"] is None  # unknown, not 0
    (done,) = [ln for ln in lines if " done " in ln]
    assert "tokens 30 (prompt 20 + completion 10)" in done and "cached" not in done


def test_a_failing_cell_does_not_stop_the_sweep(tmp_path):
    spec = parse_sweep({**BASE, "grid": {"protocol": ["mad", "probmad"], "density": [0.5]}})
    eng = FakeEngine(fail_on="mad")
    cells = run_sweep(spec, tmp_path, runner=eng, echo=lambda s: None)
    assert [c.status for c in cells] == ["error", "finished"]
    assert "no such file" in cells[0].error
    m = json.loads((tmp_path / MANIFEST).read_text())
    assert m["counts"] == {"error": 1, "finished": 1}


def test_a_cell_stopped_on_the_error_rate_is_marked_and_the_sweep_goes_on(tmp_path):
    from actors.driver import ErrorRateExceeded

    spec = parse_sweep({**BASE, "grid": {"protocol": ["mad", "probmad"], "density": [0.5]}})
    stop = ErrorRateExceeded("run x stopped: ...", "9 of 20 calls errored (45%), more than --max-error-rate 0.2")
    cells = run_sweep(spec, tmp_path, runner=FakeEngine(fail_on="mad", error=stop), echo=lambda s: None)
    assert [c.status for c in cells] == ["stopped", "finished"] and "--max-error-rate 0.2" in cells[0].error
    assert json.loads((tmp_path / MANIFEST).read_text())["counts"] == {"stopped": 1, "finished": 1}
    assert disk_status(cells[0]) == ("pending", {})  # read from disk again: a re-run resumes it


def test_a_value_error_from_a_bug_stops_the_sweep(tmp_path):
    spec = parse_sweep({**BASE, "grid": {"protocol": ["mad", "probmad"], "density": [0.5]}})
    eng = FakeEngine(fail_on="mad", error=ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        run_sweep(spec, tmp_path, runner=eng, echo=lambda s: None)
    assert eng.calls == [eng.calls[0]]  # the next cell never ran


def test_disk_status_needs_every_question(tmp_path):
    cell = expand(parse_sweep({**BASE, "protocol": "mad"}), tmp_path)[0]
    assert disk_status(cell) == ("pending", {})
    sink = ParquetSink(cell.out)
    sink.write(
        "questions",
        complete_rows(
            "questions", [{"run_id": cell.run_id, "question_id": "a"}, {"run_id": "other", "question_id": "b"}]
        ),
    )
    sink.flush()
    sink.write_run({"run_id": cell.run_id, "status": "finished", "n_questions": 2})
    assert disk_status(cell)[0] == "partial"  # the other run's row does not count
    sink.write("questions", complete_rows("questions", [{"run_id": cell.run_id, "question_id": "b"}]))
    sink.flush()
    assert disk_status(cell)[0] == "finished"


def test_write_manifest_is_atomic_json(tmp_path):
    path = write_manifest(tmp_path / "d", {"cells": [], "x": Path("p")})
    assert json.loads(path.read_text()) == {"cells": [], "x": "p"}
    assert [p.name for p in (tmp_path / "d").iterdir()] == [MANIFEST]


def test_leftover_temp_files_of_a_killed_writer_are_ignored(tmp_path):
    sink = ParquetSink(tmp_path)
    sink.write("calls", complete_rows("calls", [{"run_id": "r", "question_id": "q", "round": 0, "reused": True}]))
    sink.flush()
    # what a writer killed between pq.write_table and os.replace leaves behind
    (tmp_path / "calls" / ".part-dead-00001.parquet.1234abcd.tmp").write_bytes(b"PAR1 half written")
    t = read_table(tmp_path, "calls")
    assert t.num_rows == 1 and t.column("reused").to_pylist() == [True]
    assert ds.dataset(str(tmp_path / "calls")).count_rows() == 1  # pyarrow skips dot-files too


def test_calls_schema_holds_every_call_record_field_plus_the_run_labels():
    from engine.records import CallRecord
    from engine.results import CALLS_SCHEMA

    fields = {f.name for f in dataclasses.fields(CallRecord)}
    assert {"reused", "truncated_messages"} <= fields
    assert set(CALLS_SCHEMA.names) == fields | {"run_id", "backend", "simulated", "attempt"}
    assert RunConfig().tuning.reuse_first_round is False  # off by default in `debate run`


# ------------------------------------------------------------------------------------ cache core
def req(**kw) -> GenRequest:
    base = dict(
        messages=[{"role": "user", "content": "What is 2+3?"}], temperature=0.7, top_p=1.0, max_tokens=64, seed=11
    )
    base.update(kw)
    return GenRequest(**base)


def test_first_round_key_is_sha256_of_the_request_json():
    r = req()
    expected = hashlib.sha256(
        json.dumps(
            {
                "namespace": "ns",
                "model": "m",
                "messages": r.messages,
                "temperature": 0.7,
                "top_p": 1.0,
                "max_tokens": 64,
                "seed": 11,
                "meta": {},
            },
            sort_keys=True,
            ensure_ascii=False,
        ).encode()
    ).hexdigest()
    assert first_round_key(r, "m", "ns") == expected
    assert first_round_key(req(), "m", "ns") == expected  # equal requests, equal keys
    variants = [
        first_round_key(
            req(messages=[{"role": "system", "content": "Be terse."}, {"role": "user", "content": "What is 2+3?"}]),
            "m",
            "ns",
        ),
        first_round_key(req(messages=[{"role": "user", "content": "What is 2+4?"}]), "m", "ns"),
        first_round_key(req(temperature=0.25), "m", "ns"),
        first_round_key(req(top_p=0.9), "m", "ns"),
        first_round_key(req(max_tokens=65), "m", "ns"),
        first_round_key(req(seed=12), "m", "ns"),
        first_round_key(req(), "other-model", "ns"),
        first_round_key(req(), "m", "other-replica-options"),
        first_round_key(req(meta={"gold": "5"}), "m", "ns"),
    ]
    assert len(set(variants) | {expected}) == len(variants) + 1


def result(text="5", error=None) -> GenResult:
    return GenResult(text=text, prompt_tokens=7, completion_tokens=3, latency_s=0.2, error=error)


def test_reply_cache_in_flight_dedup():
    async def scenario():
        cache = ReplyCache()
        assert await cache.acquire("k") is None  # first asker owns the key
        waiter = asyncio.create_task(cache.acquire("k"))
        await asyncio.sleep(0.01)
        assert not waiter.done()  # the second asker waits for the owner
        cache.put("k", result("five"))
        got = await asyncio.wait_for(waiter, 1.0)
        assert got.text == "five" and (got.prompt_tokens, got.completion_tokens) == (7, 3)
        assert (await cache.acquire("k")).text == "five" and cache.get("k").text == "five"
        return cache.stats

    stats = asyncio.run(scenario())
    assert (stats["misses"], stats["hits"], stats["waits"], stats["puts"]) == (1, 2, 1, 1)


def test_reply_cache_never_stores_failures_and_hands_the_key_on():
    async def scenario():
        cache = ReplyCache()
        assert await cache.acquire("k") is None
        waiter = asyncio.create_task(cache.acquire("k"))
        await asyncio.sleep(0.01)
        cache.put("k", result("", error="boom"))  # the owner failed
        assert await asyncio.wait_for(waiter, 1.0) is None  # the waiter now owns the key
        assert cache.get("k") is None and len(cache) == 0
        cache.put("k", None)
        # an owner that never answers: a waiter takes over after takeover_s
        slow = ReplyCache(takeover_s=0.05)
        assert await slow.acquire("x") is None
        assert await asyncio.wait_for(slow.acquire("x"), 1.0) is None
        return cache.stats, slow.stats

    stats, slow = asyncio.run(scenario())
    assert stats["failed"] == 2 and stats["puts"] == 0 and slow["takeovers"] == 1


# ------------------------------------------------------------------------------------ on Ray
def _sim(tmp_path, name, **kw) -> RunConfig:
    base = dict(backend="simulated", limit=5, agents=3, rounds=2, progress=False, out=str(tmp_path / name))
    base.update(kw)
    return RunConfig.flat(**base)


def _calls(out) -> object:
    return read_table(out, "calls").to_pandas().sort_values(["question_id", "round", "agent_id"]).reset_index(drop=True)


@pytest.mark.ray
def test_sweep_keeps_one_replica_across_cells(ray_local, tmp_path):
    from actors.driver import DebateRunner

    spec = parse_sweep(
        {
            "backend": "simulated",
            "limit": 3,
            "agents": 3,
            "rounds": 2,
            "progress": False,
            "topology": "ring",
            "grid": {"protocol": ["mad", "sparse", "cot"]},
        }
    )
    seen = []

    class Spy(DebateRunner):
        def run(self, cfg, *a, **kw):
            res = super().run(cfg, *a, **kw)
            seen.append((dict(self._replicas), self._cache))
            return res

    with Spy() as runner:
        cells = run_sweep(spec, tmp_path / "s", runner=runner, echo=lambda s: None)
    assert [c.status for c in cells] == ["finished"] * 3 and len(seen) == 3
    handles = [list(r.values()) for r, _ in seen]
    assert all(len(h) == 1 for h in handles)
    assert all(h[0] is handles[0][0] for h in handles)  # the same replica actor served every cell
    assert len({str(h[0]._actor_id) for h in handles}) == 1
    assert all(c is seen[0][1] and c is not None for _, c in seen)  # and one first-round cache
    for c in cells:
        q = read_table(c.out, "questions").to_pandas()
        assert sorted(q.question_id) == sorted(set(q.question_id)) and len(q) == 3


@pytest.mark.ray
def test_first_round_reuse_gives_identical_results_and_saves_requests(ray_local, tmp_path):
    from actors.driver import DebateRunner, run

    mad = _sim(tmp_path, "mad", protocol="mad", agents=4, reuse_first_round=True)
    sparse = _sim(tmp_path, "sparse", protocol="sparse", agents=4, topology="ring", reuse_first_round=True)
    with DebateRunner() as runner:
        r1 = runner.run(mad)
        r2 = runner.run(sparse)
    plain = run(sparse.replace(reuse_first_round=False, out=str(tmp_path / "plain")))
    assert r2.run_id == plain.run_id  # reuse is not part of the run id
    a, b = _calls(r2.out_dir), _calls(plain.out_dir)
    assert list(a.text) == list(b.text) and list(a.answer) == list(b.answer)
    assert list(a.prompt_tokens) == list(b.prompt_tokens) and list(a.completion_tokens) == list(b.completion_tokens)
    assert r2.summary == plain.summary
    assert a[a["round"] == 0].reused.all() and not a[a["round"] > 0].reused.any()
    assert not b.reused.any()
    assert not _calls(r1.out_dir).reused.any()  # the first run generated its first round
    n_round0 = 5 * 4
    requests = r2.replica_stats[0]["requests"] - r1.replica_stats[0]["requests"]
    assert requests == plain.replica_stats[0]["requests"] - n_round0 == 5 * 4 * 2 - n_round0


@pytest.mark.ray
def test_identical_first_requests_in_one_run_are_generated_once(ray_local, tmp_path):
    from actors.driver import run

    cfg = _sim(
        tmp_path,
        "twins",
        limit=4,
        agents=3,
        rounds=1,
        protocol="sc",
        reuse_first_round=True,
        agent_settings=[{"seed": 5}, {"seed": 5}],
    )  # agents 0 and 1 ask exactly the same
    res = run(cfg)
    calls = _calls(res.out_dir)
    assert res.replica_stats[0]["requests"] == 4 * 2  # 12 calls, 8 sent to the replica
    assert calls.reused.sum() == 4 and set(calls[calls.reused].agent_id) <= {0, 1}
    twins = calls[calls.agent_id < 2].groupby("question_id")
    assert (twins.text.nunique() == 1).all() and (twins.completion_tokens.nunique() == 1).all()


def test_sweep_aggregates_finished_cells_over_seeds():
    from app.sweep import Cell, across_seeds, format_seeds

    def cell(i, seed, protocol, acc, tokens):
        return Cell(
            index=i,
            params={"protocol": protocol, "seed": seed},
            config=RunConfig(),
            run_id=f"r{i}",
            out=None,
            status="finished",
            result={"accuracy": acc, "tokens": tokens, "n_questions": 10},
        )

    cells = [
        cell(0, 1, "mad", 0.5, 1000),
        cell(1, 2, "mad", 0.7, 3000),
        cell(2, 1, "sparse", 0.4, 500),
        cell(3, 2, "sparse", 0.4, 700),
        cell(4, 3, "sparse", 0.4, 600),
    ]
    cells.append(
        Cell(
            index=5,
            params={"protocol": "sparse", "seed": 4},
            config=RunConfig(),
            run_id="r5",
            out=None,
            status="pending",
        )
    )  # not finished: not counted
    groups = {g["params"]["protocol"]: g for g in across_seeds(cells)}
    assert groups["mad"]["seeds"] == [1, 2] and groups["mad"]["accuracy_mean"] == pytest.approx(0.6)
    assert groups["mad"]["accuracy_sd"] == pytest.approx(0.1414, abs=1e-4) and groups["mad"]["tokens_per_q_mean"] == 200
    assert groups["sparse"]["seeds"] == [1, 2, 3] and groups["sparse"]["accuracy_sd"] == 0
    lines = format_seeds(across_seeds(cells))
    assert lines[0] == "across seeds (mean ± sd):" and "protocol=mad  over 2 seeds: accuracy 0.600 ± 0.141" in lines[1]
    assert not lines[1].endswith("(SIMULATED model)")  # the cells' backend is the default (real) one
    for c in cells:
        c.config = RunConfig.flat(backend="simulated")
    assert all(line.endswith("(SIMULATED model)") for line in format_seeds(across_seeds(cells))[1:])


@pytest.mark.ray
def test_a_half_done_cell_resumes_on_the_real_engine(ray_local, tmp_path):
    """A cell whose run stopped after two of its four questions (written by the real engine under
    the cell's run id) is resumed by the sweep on the real engine: the two missing questions are
    debated, the two done are not, and each question has one row."""
    from actors.driver import DebateRunner
    from engine.dataset_routing import experiment_questions

    spec = parse_sweep({**BASE, "limit": 4, "grid": {"seed": [1, 2]}})
    out = tmp_path / "sweep"
    first, second = expand(spec, out)
    cfg = first.config
    questions = experiment_questions(cfg.experiment)
    with DebateRunner() as runner:
        half = runner.run(cfg, questions=questions[:2])
        assert half.run_id == first.run_id and half.summary["n_questions"] == 2
        # as a run stopped midway leaves it: its run row not "finished"
        for f in (first.out / "runs").glob("*.parquet"):
            f.unlink()
        ParquetSink(first.out).write_run({"run_id": first.run_id, "status": "running", "n_questions": 4})
        assert disk_status(first) == ("partial", {"questions_done": 2})
        seen: list[tuple[str, int]] = []

        class Spy:  # the real engine, its results recorded
            def run(self, c, *a, **kw):
                res = runner.run(c, *a, **kw)
                seen.append((res.run_id, res.resumed))
                return res

        cells = run_sweep(spec, out, runner=Spy(), echo=lambda s: None)
    assert [c.status for c in cells] == ["finished", "finished"]
    assert seen == [(first.run_id, 2), (second.run_id, 0)]
    q = read_table(first.out, "questions").to_pandas()
    assert sorted(q.question_id) == sorted(x.qid for x in questions) and q.question_id.is_unique
    calls = read_table(first.out, "calls").to_pandas()
    assert len(calls) == 4 * cfg.experiment.agents * cfg.experiment.rounds  # the done questions were not debated again


class _FailingBackend(Backend):
    """A backend whose every call fails (an error result, as a broken server gives)."""

    mode = "batch"

    def __init__(self, model: str) -> None:
        self.settings = {"model": model}

    def generate(self, requests):
        return [GenResult("", 0, 0, 0.0, "error", "HTTP 500 from the server") for _ in requests]


@pytest.mark.ray
def test_a_sweep_on_the_real_engine_marks_a_cell_stopped_and_goes_on(ray_local, tmp_path):
    """`debate sweep` end to end on the real engine: a cell whose backend fails every call stops on
    --max-error-rate (status stopped, its rows kept, exit code 1), the next cell finishes, and
    running the sweep again leaves the finished cell alone and tries the stopped one again."""
    from backends.registry import BackendSpec, register, unregister

    register(BackendSpec("failing", _FailingBackend, summary="every call fails"))
    try:
        base = {k: v for k, v in BASE.items() if k != "backend"}
        sweep = {**base, "limit": 8, "agents": 3, "max_error_rate": 0.2, "grid": {"backend": ["failing", "simulated"]}}
        path = tmp_path / "sweep.yaml"
        path.write_text(yaml.safe_dump(sweep))
        out = tmp_path / "sweep"
        assert sweep_command(str(path), str(out)) == 1  # what `debate sweep` exits with
        m = json.loads((out / MANIFEST).read_text())
        assert m["counts"] == {"stopped": 1, "finished": 1}
        stopped, finished = m["cells"]
        assert (stopped["status"], finished["status"]) == ("stopped", "finished")
        assert "more than --max-error-rate 0.2" in stopped["error"]
        calls = read_table(out / stopped["dir"], "calls").to_pandas()
        assert len(calls) >= 20 and calls.error.notna().all()  # its rows stay on disk
        assert read_table(out / stopped["dir"], "runs").to_pylist()[-1]["status"] == "stopped: error rate"
        from actors.driver import DebateRunner

        spec = parse_sweep(sweep)
        with DebateRunner() as runner:
            seen = []

            class Spy:
                def run(self, c, *a, **kw):
                    seen.append(c.sampling.backend)
                    return runner.run(c, *a, **kw)

            again = run_sweep(spec, out, runner=Spy(), echo=lambda s: None)
        assert seen == ["failing"] and [c.status for c in again] == ["stopped", "finished"]
    finally:
        unregister("failing")


# ------------------------------------------------------------------------------------ folders and density
def test_cell_folders_are_readable_and_end_with_the_run_ids_hash(tmp_path):
    data = {**BASE, "rounds": 3, "agents": 6, "grid": {"protocol": ["mad", "sparse"], "density": ["2/5"], "seed": [1]}}
    cells = expand(parse_sweep(data), tmp_path / "out")
    mad, sparse = cells
    assert mad.out.name == f"mad_n6_r3_s1-{mad.run_id.split('-')[1]}"  # mad reads no density
    assert sparse.out.name == f"sparse_n6_r3_d0.4_s1-{sparse.run_id.split('-')[1]}"
    assert sparse.config.output.out == str(sparse.out) and sparse.params["density"] == 0.4
    m = manifest(parse_sweep(data), cells, tmp_path / "out")
    assert [c["dir"] for c in m["cells"]] == [mad.out.name, sparse.out.name]
    assert [c["run_id"] for c in m["cells"]] == [mad.run_id, sparse.run_id]  # the id is still the id


def test_a_sweep_started_with_run_id_folders_keeps_them(tmp_path):
    """A sweep directory written before folders had names resumes in its ``<run_id>`` folders."""
    data = {**BASE, "grid": {"protocol": ["mad"], "seed": [1, 2]}}
    first = expand(parse_sweep(data), tmp_path)
    (tmp_path / first[0].run_id / "questions").mkdir(parents=True)  # the old layout, one cell started
    again = expand(parse_sweep(data), tmp_path)
    assert again[0].out == tmp_path / again[0].run_id and again[0].config.output.out == str(tmp_path / again[0].run_id)
    assert again[1].out == first[1].out and again[1].out.name != again[1].run_id


def _readme_sweep() -> dict:
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = text.split("## Sweeps\n", 1)[1].split("```yaml", 1)[1].split("\n", 1)[1].split("```", 1)[0]
    return yaml.safe_load(block)


def test_the_readme_sweep_example_has_no_invalid_cell(tmp_path):
    data = _readme_sweep()
    spec = parse_sweep({**data, "backend": "simulated"}, "README.md")
    cells = expand(spec, tmp_path)
    assert spec.n_points >= 20 and len(cells) >= 12
    assert [c.error for c in cells if not c.valid] == []
    assert {c.config.experiment.protocol for c in cells} == {"mad", "sparse", "probmad"}


def test_a_degree_axis_and_a_density_axis_give_the_same_cells(tmp_path):
    base = {**{k: v for k, v in BASE.items() if k != "agents"}, "protocol": "sparse"}
    by_degree = expand(parse_sweep({**base, "grid": {"agents": [4, 6], "degree": [2]}}), tmp_path)
    by_density = expand(parse_sweep({**base, "grid": {"agents": [4, 6], "density": ["2/3", 0.4]}}), tmp_path)
    assert [c.config.option(DENSITY) for c in by_degree] == [2 / 3, 0.4]
    valid = [c.run_id for c in by_density if c.valid]
    assert [c.run_id for c in by_degree] == valid and len(valid) == 2
    assert "density=0.6667" in by_density[0].label  # not 0.6666666666666666
    # a degree with no graph is an invalid cell naming --degree, not a failed sweep
    odd = expand(parse_sweep({**base, "agents": 5, "grid": {"degree": [2, 3]}}), tmp_path)
    assert odd[0].valid and not odd[1].valid and "--degree 3 with --agents 5" in (odd[1].error or "")
