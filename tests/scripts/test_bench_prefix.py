"""scripts/bench_prefix.py: its flags, cell order and predictions without Ray (the predictions
against an in-process simulated debate), and one tiny run of the script on the simulated backend
through Ray (the JSON and PNG it writes)."""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import pytest

from actors.local_run import run_local
from backends.simulated_backend import SimulatedBackend
from engine.tasks import arithmetic_questions

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_prefix.py"
spec = importlib.util.spec_from_file_location("bench_prefix", SCRIPT)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def _args(**kw) -> argparse.Namespace:
    base = dict(rounds=3, questions=2, max_tokens=16, backend="simulated", kv_cache_bytes=None)
    return argparse.Namespace(**{**base, **kw})


def test_flags_are_checked_naming_the_flag():
    assert bench.parse_list("mad, group", "--protocols", bench.PROTOCOLS) == ["mad", "group"]
    assert bench.parse_agents("3,6, 24") == [3, 6, 24]
    with pytest.raises(SystemExit, match="--protocols 'mad,sparse'"):
        bench.parse_list("mad,sparse", "--protocols", bench.PROTOCOLS)
    with pytest.raises(SystemExit, match="--layouts ''"):
        bench.parse_list("", "--layouts", bench.LAYOUTS)
    for bad in ("", "1,3", "three"):
        with pytest.raises(SystemExit, match="--agents"):
            bench.parse_agents(bad)


def test_layouts_of_a_size_run_side_by_side_in_alternating_order():
    cells = bench.cell_order(["mad", "group"], [3, 6, 12], ["paper", "shared"])
    assert cells[:6] == [
        ("mad", 3, "paper"),
        ("mad", 3, "shared"),
        ("mad", 6, "shared"),
        ("mad", 6, "paper"),
        ("mad", 12, "paper"),
        ("mad", 12, "shared"),
    ]
    assert len(cells) == 12 and len(set(cells)) == 12 and cells[6] == ("group", 3, "paper")


def test_relative_error_is_unknown_without_both_figures():
    assert bench.rel_err(110, 100) == pytest.approx(0.1)
    assert bench.rel_err(None, 100) is None and bench.rel_err(5, None) is None and bench.rel_err(5, 0) is None


@pytest.mark.parametrize("protocol", ["mad", "group"])
@pytest.mark.parametrize("layout", ["paper", "shared"])
def test_predicted_prompt_tokens_match_a_simulated_debate(protocol, layout):
    """On the simulated backend the closed form is exact for MAD and GroupDebate in both layouts:
    the prediction the script makes equals the prompt tokens of the same debate run in-process."""

    base = bench.base_config(_args())
    cfg = base.replace(protocol=protocol, agents=4, prompt_layout=layout).validate()
    questions = arithmetic_questions(2, seed=cfg.experiment.seed)
    out = run_local(cfg, questions, SimulatedBackend())
    calls = [r for _, log in out for r in log.records]
    sent = sum(r.prompt_tokens for r in calls)
    reply = sum(r.completion_tokens for r in calls) / len(calls)
    got = bench.predictions(cfg, questions, bench.token_counters(cfg), reply)
    assert got["predicted_prompt_tokens"] == sent
    assert got["kv_question_tokens"] > 0


def test_the_serve_line_is_skipped_on_an_engine_without_debate_serve(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "has_serve", lambda debate: False)
    assert bench.serve_line(_args(), "mad", 3, tmp_path) == {"status": "skipped: this engine has no debate serve"}
    assert list(tmp_path.iterdir()) == []


@pytest.mark.ray
def test_script_json_and_png_on_the_simulated_backend(ray_local, tmp_path):
    """The whole script at a tiny size: both protocols and layouts at 2 and 3 agents, one replica
    for every cell; the simulated backend has no prefix cache, and the JSON says so."""
    out = tmp_path / "prefix.json"
    argv = ["--backend", "simulated", "--agents", "2,3", "--questions", "1", "--rounds", "2", "--max-tokens", "16"]
    assert bench.main([*argv, "--no-serve", "--quiet", "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["benchmark"] == "prefix" and r["simulated"] and r["backend"] == "simulated"
    assert r["machine"]["cpus"] >= 1 and "commit" in r and "--agents 2,3" in r["command"]
    assert r["note"] == bench.SIMULATED_NOTE and any(m.startswith("cached_prompt_tokens") for m in r["missing"])
    assert r["startup"]["whole_s"] > 0 and r["startup"]["replicas_s"] >= 0
    assert [(x["protocol"], x["agents"], x["layout"]) for x in r["rows"]] == bench.cell_order(
        ["mad", "group"], [2, 3], ["paper", "shared"]
    )
    for row in r["rows"]:
        assert set(bench_row_keys()) <= set(row)
        assert row["errors"] == 0 and row["questions"] == 1 and row["calls"] >= 2 * row["agents"]
        assert row["cached_prompt_tokens"] is None and row["computed_prompt_tokens"] is None
        assert row["computed_rel_err"] is None and row["perfect_rel_err"] is None
        # counted from the stored prompts (engine.prefix_runs) and predicted in closed form, within 10 %
        assert row["perfect_cache_computed_tokens"] > 0 and row["predicted_computed_tokens"] > 0, row
        assert abs(row["predicted_vs_perfect_rel_err"]) <= 0.1, row
        assert row["predicted_prompt_tokens"] == row["prompt_tokens"] and row["prompt_rel_err"] == 0
        assert row["wall_s"] > 0 and row["calls_per_s"] > 0 and row["kv_question_tokens"] > 0
    assert len({x["run_id"] for x in r["rows"]}) == len(r["rows"])  # every cell its own run
    assert all(x["startup_s"] < r["startup"]["whole_s"] for x in r["rows"])  # the replica is reused
    assert r["serve"] == {"status": "skipped: --no-serve"}
    png = Path(r["png"])
    assert png == out.with_suffix(".png") and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def bench_row_keys() -> list[str]:
    """The columns every row has (the brief's, then the predictions)."""
    return [
        "protocol",
        "agents",
        "layout",
        "prompt_tokens",
        "cached_prompt_tokens",
        "computed_prompt_tokens",
        "wall_s",
        "calls_per_s",
        "predicted_prompt_tokens",
        "predicted_computed_tokens",
        "perfect_cache_computed_tokens",
        "kv_question_tokens",
        "prompt_rel_err",
        "computed_rel_err",
        "perfect_rel_err",
    ]


@pytest.mark.ray
def test_kv_in_flight_on_off_runs_each_cell_both_ways(ray_local, tmp_path):
    """``--kv-in-flight on,off``: each cell with the KV-aware limit and without it, side by side,
    each on questions of its own; the rows say which."""
    out = tmp_path / "kv.json"
    argv = ["--backend", "simulated", "--agents", "2", "--protocols", "mad", "--layouts", "shared"]
    argv += ["--questions", "1", "--rounds", "2", "--max-tokens", "8", "--kv-in-flight", "on,off"]
    assert bench.main([*argv, "--no-serve", "--quiet", "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert [(x["layout"], x["kv_in_flight"]) for x in r["rows"]] == [("shared", True), ("shared", False)]
    assert r["params"]["kv_in_flight"] == "on,off" and all(x["questions_in_flight"] for x in r["rows"])
    with pytest.raises(SystemExit, match="--kv-in-flight 'maybe'"):
        bench.main([*argv[:-1], "maybe", "--no-serve", "--quiet", "--out", str(out)])
