"""Every number a run takes is finite and within a range that --help states, and sizes that
multiply (agents x agents, questions in flight x their tokens, generated questions) are checked
against the machine's memory before anything is allocated: bad input is one line, exit 2, at once,
and Ray never starts."""

from __future__ import annotations

import math
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from app.cli import build_parser, main, subcommands
from engine.config import ENGINE_OPTIONS, PROTOCOL_OPTIONS, ConfigError, RunConfig, config_from_mapping
from engine.options import Option
from tests.support.cli import timed_main

ROOT = Path(__file__).resolve().parents[2]
NUMBER_OPTIONS = [o for o in (*ENGINE_OPTIONS, *PROTOCOL_OPTIONS.values()) if o.type in (int, float)]


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--temperature", "nan"),  # ran and stored NaN
        ("--max-error-rate", "nan"),  # stopped a healthy run
        ("--sim-latency-s", "inf"),  # finished "finished" with every call an error row
        ("--agents", "10000000"),  # a numpy ArrayMemoryError traceback
        ("--rounds", "100000"),
        ("--top-p", "nan"),
        ("--sim-follow", "nan"),
        ("--sim-invalid", "2"),
        ("--seed", "-1"),
        ("--placement-timeout", "inf"),
        ("--replica-cpus", "-2"),
        ("--tau", "nan"),
        ("--cortex-s-offset", "nan"),
    ],
)
def test_a_number_out_of_its_range_is_one_line_at_once(capsys, tmp_path, no_ray, flag, value):
    argv = ["run", "--backend", "simulated", "--no-progress", "--out", str(tmp_path / "o"), flag, value]
    code, text, took = timed_main(capsys, argv)
    assert code == 2 and len(text.splitlines()) == 1, text
    assert text.startswith(f"debate: error: {flag} ") and "within" in text, text
    assert took < 5, f"took {took:.1f} s"
    assert not (tmp_path / "o").exists()


def test_every_number_option_has_finite_bounds_that_help_states():
    assert NUMBER_OPTIONS
    for opt in NUMBER_OPTIONS:
        assert math.isfinite(opt.low) and math.isfinite(opt.high) and opt.low <= opt.high, opt.name
    helps = {a.dest: a.help or "" for a in subcommands(build_parser())["run"]._actions}
    for opt in NUMBER_OPTIONS:
        if opt.cli:
            assert f"range {opt.range_text}" in helps[opt.name], (opt.flag, helps[opt.name])
    with pytest.raises(TypeError, match="a number needs finite bounds"):
        Option("unbounded", int, 1, "x", low=0)
    RunConfig.flat(backend="simulated").validate()  # a bound never rejects what a run gets without the flag
    for opt in NUMBER_OPTIONS:
        opt.check(opt.default)


@pytest.mark.parametrize(
    "data, needle",
    [
        ({"agents": 2, "agent_settings": [{"temperature": float("nan")}]}, "agent_settings[0].temperature"),
        ({"agents": 2, "agent_settings": [{}, {"max_tokens": 10**9}]}, "agent_settings[1].max_tokens"),
        ({"agent_settings": [{"seed": -1}]}, "agent_settings[0].seed"),
        ({"placement_resources": {"m": {"replicas": 10**9}}}, "placement_resources['m'].replicas"),
        ({"placement_resources": {"m": {"max_model_len": float("inf")}}}, "placement_resources['m'].max_model_len"),
        ({"placement_resources": {"m": {"num_gpus": float("nan")}}}, "placement_resources['m'].num_gpus"),
        ({"placement_resources": {"m": {"resources": {"big": -1}}}}, "placement_resources['m'].resources.big"),
        ({"placement_resources": {"m": 3}}, "placement_resources['m'] must be a mapping"),
    ],
)
def test_numbers_given_in_yaml_mappings_are_bounded_too(data, needle):
    with pytest.raises(ConfigError) as err:
        config_from_mapping(data).validate()
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_a_sweep_cell_with_a_number_out_of_range_is_invalid(tmp_path):
    from app.sweep import expand, parse_sweep

    spec = parse_sweep({"backend": "simulated", "grid": {"temperature": [0.5, float("nan"), 3]}}, "s.yaml")
    cells = expand(spec, tmp_path)
    assert [c.valid for c in cells] == [True, False, False]
    assert "--temperature must be a finite number within [0, 2]" in str(cells[1].error)
    assert "--temperature must be within [0, 2] (got 3)" in str(cells[2].error)


def test_a_sweep_grid_of_too_many_points_is_refused_before_a_cell_is_made():
    from app.sweep import SweepError, parse_sweep

    grid = {"seed": list(range(1000)), "temperature": [i / 1000 for i in range(1000)]}
    with pytest.raises(SweepError, match=r"^s\.yaml: the grid has 1,000,000 points \(1000 x 1000\), more than"):
        parse_sweep({"backend": "simulated", "grid": grid}, "s.yaml")


# ---------------------------------------------------------------------------------- sizes
def run_limited(argv: list[str], tmp_path: Path, memory_mb: int = 1024) -> tuple[int, str, float]:
    """``debate`` in a subprocess that may take ``memory_mb`` of address space (so code that
    would allocate gigabytes fails fast instead of filling the machine), with a Ray address that
    refuses connections (so it never starts Ray)."""
    limit = memory_mb * 2**20

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    code = "import sys; from app.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {"PATH": "/usr/bin:/bin", "RAY_ADDRESS": "127.0.0.1:9", "HOME": str(tmp_path)}
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv],
        cwd=ROOT,
        env=env,
        preexec_fn=cap,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.returncode, proc.stderr.strip(), time.perf_counter() - start


# each case is a child process under a memory limit (a second each): one in the inner loop
_SLOW_CASE = pytest.mark.slow


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--limit", "10000000"),
        pytest.param("--sim-reply-tokens", "100000000", marks=_SLOW_CASE),
        pytest.param("--max-tokens", "100000000", marks=_SLOW_CASE),
    ],
)
def test_sizes_that_would_take_gigabytes_are_refused_before_allocating(tmp_path, flag, value):
    argv = ["run", "--backend", "simulated", "--no-progress", "--out", str(tmp_path / "o"), flag, value]
    code, text, took = run_limited(argv, tmp_path)
    assert code == 2 and len(text.splitlines()) == 1, text
    assert text.startswith(f"debate: error: {flag} must be within"), text
    assert took < 30, f"took {took:.1f} s"  # a subprocess: its imports included


def test_agent_graphs_too_large_for_the_memory_are_refused_naming_agents(monkeypatch, capsys, tmp_path, no_ray):
    import engine.footprint

    monkeypatch.setattr(engine.footprint, "available_bytes", lambda: 64 * 2**20)
    argv = ["run", "--backend", "simulated", "--no-progress", "--out", str(tmp_path / "o"), "--agents", "2000"]
    code, text, _ = timed_main(capsys, argv)
    assert code == 2 and len(text.splitlines()) == 1, text
    assert text.startswith("debate: error: --agents 2000: the agent graphs (2000 x 2000) need about"), text
    assert "0.1 GiB available" in text


def test_questions_in_flight_too_large_for_the_memory_name_max_concurrent_questions(
    monkeypatch, capsys, tmp_path, no_ray
):
    import engine.footprint

    monkeypatch.setattr(engine.footprint, "available_bytes", lambda: 256 * 2**20)
    out = tmp_path / "o"
    argv = ["run", "--backend", "simulated", "--no-progress", "--out", str(out), "--agents", "100", "--limit", "64"]
    argv += ["--sim-reply-tokens", "400", "--max-tokens", "400"]
    code, text, _ = timed_main(capsys, argv)
    assert code == 2 and len(text.splitlines()) == 1, text
    assert text.startswith("debate: error: 64 questions in flight (--max-concurrent-questions)"), text
    assert "--sim-reply-tokens 400" in text and "lower --max-concurrent-questions (results stay the same)" in text
    assert not out.exists()
    # fewer at once (a setting that leaves results alone) fits, on to the next check (here: Ray)
    with pytest.raises(AssertionError, match="Ray was started"):
        main([*argv, "--max-concurrent-questions", "4"])


def test_generated_questions_too_many_for_the_memory_name_limit(monkeypatch):
    import engine.footprint

    monkeypatch.setattr(engine.footprint, "available_bytes", lambda: 2**20)
    with pytest.raises(ConfigError, match=r"^--limit 5000: 5,000 generated questions need about"):
        RunConfig.flat(backend="simulated", limit=5000).validate()
    RunConfig.flat(backend="simulated", limit=5000, dataset="data.jsonl").validate()  # a file's rows are its own


def test_an_arithmetic_offset_is_skipped_without_making_the_questions():
    from engine.dataset_routing import load_questions

    whole = load_questions("arithmetic", None, 20, 7)
    assert load_questions("arithmetic", None, 5, 7, offset=15) == whole[15:]
    tracemalloc.start()
    try:
        load_questions("arithmetic", None, 5, 7, offset=30_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20, f"peak {peak / 2**20:.1f} MiB for 5 questions"


def test_a_simulated_reply_longer_than_max_tokens_is_never_made_whole():
    from backends.simulated_backend import SimulatedBackend
    from engine.records import GenRequest

    def reply(reply_tokens: int, max_tokens: int) -> tuple[str, str]:
        req = GenRequest(messages=[{"role": "user", "content": "1+1?"}], max_tokens=max_tokens, seed=3)
        req.meta.update(gold="2", task="numeric")
        (res,) = SimulatedBackend(reply_tokens=reply_tokens).generate([req])
        return res.text, res.finish_reason

    assert reply(10**6, 16) == reply(100, 16)  # the same cut text
    text, finish = reply(10**6, 16)
    assert len(text.split()) == 16 and finish == "length"
    assert reply(20, 40)[1] == "stop" and len(reply(20, 40)[0].split()) == 20
    tracemalloc.start()
    try:
        reply(10**6, 16)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20, f"peak {peak / 2**20:.1f} MiB for a 16-token reply"
