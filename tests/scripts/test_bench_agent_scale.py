"""scripts/bench_agent_scale.py: its sizes, skips, run facts and targets without Ray; the memory
sampler on a small process tree; and one tiny real run of the script (3 agents, 1 question)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_agent_scale.py"
spec = importlib.util.spec_from_file_location("bench_agent_scale", SCRIPT)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

GB, MB = 1024**3, 1024**2


def test_sizes_take_their_own_question_count():
    assert bench.parse_sizes("6, 32,1000:2", 4) == [(6, 4), (32, 4), (1000, 2)]
    assert bench.parse_sizes(bench.DEFAULT_AGENTS, 4)[-1] == (1000, 2)  # the N=1000 target's 2 questions
    for bad in ("", "0", "6:0"):
        with pytest.raises(ValueError):
            bench.parse_sizes(bad, 4)


def test_only_per_agent_sizes_are_skipped_and_each_says_why():
    assert bench.skip_reason("packed", 1000, 128, 80, 1 * GB, 0) is None
    assert "--max-per-agent 128" in bench.skip_reason("per-agent", 129, 128, 80, 100 * GB, 0)
    assert bench.skip_reason("per-agent", 128, 128, 80, 100 * GB, 2 * GB) is None
    why = bench.skip_reason("per-agent", 100, 128, 80, 9 * GB, 2 * GB)  # 7.8 GB > 9 - 2
    assert why.startswith("~7.8 GB for 100 agent processes") and "2 GB margin" in why


def test_debate_command_and_the_layout_of_each_mode():
    cmd = bench.debate_command(["debate"], 32, 4, 3, bench.MODES["per-agent"], "/tmp/x")
    assert cmd == [
        "debate",
        "run",
        "-q",
        "--backend",
        "simulated",
        "--protocol",
        "sparse",
        "--topology",
        "ring",
        "--agents",
        "32",
        "--rounds",
        "3",
        "--limit",
        "4",
        "--agents-per-actor",
        "1",
        "--out",
        "/tmp/x",
    ]
    assert bench.MODES["packed"] == () and bench.WITHOUT_FLAG == {"per-agent": (), "packed": None}


def test_run_facts_with_and_without_the_timings_column():
    row = {"wall_s": 5.0, "n_calls": 72}
    old = bench.run_facts([row], 72)  # the engine before the timings column
    assert old["replicas_s"] is old["agents_s"] is old["startup_s"] is None and not old["timings_column"]
    assert old["debate_s"] == 5.0 and old["debate_s_source"].startswith("runs.wall_s")
    assert old["calls"] == 72 and old["calls_per_s"] == 14.4
    assert bench.run_facts([{**row, "timings": None}], 72) == old  # a null cell: the same
    new = bench.run_facts([{**row, "timings": json.dumps({"replicas_s": 1.5, "agents_s": 2.0, "debate_s": 0.9})}], 72)
    assert new["startup_s"] == 3.5 and new["debate_s"] == 0.9 and new["debate_s_source"] == "timings.debate_s"
    assert new["calls_per_s"] == 80.0 and new["runs_wall_s"] == 5.0 and new["timings_column"]
    part = bench.run_facts([{**row, "timings": '{"debate_s": 2.0}'}], 0)  # no calls rows: runs.n_calls
    assert part["startup_s"] is None and part["debate_s"] == 2.0 and part["calls"] == 72
    empty = bench.run_facts([], 0)
    assert empty["debate_s"] is empty["calls"] is empty["calls_per_s"] is None


def test_memory_per_agent_is_the_growth_over_the_modes_smallest_n():
    rows = [
        {"mode": "per-agent", "agents": 6, "status": "ok", "peak_pss_gb": 1.0},
        {"mode": "per-agent", "agents": 32, "status": "ok", "peak_pss_gb": 3.0},
        {"mode": "per-agent", "agents": 512, "status": "skipped: too many"},
        {"mode": "packed", "agents": 32, "status": "ok", "peak_pss_gb": 1.5},
        {"mode": "packed", "agents": 1000, "status": "ok", "peak_pss_gb": 2.5},
    ]
    bench.per_agent_memory(rows)
    assert rows[0]["memory_per_agent_mb"] is None and rows[3]["memory_per_agent_mb"] is None
    assert rows[1]["memory_per_agent_mb"] == pytest.approx(2 * 1024 / 26, abs=0.01)
    assert rows[4]["memory_per_agent_mb"] == pytest.approx(1024 / 968, abs=0.01)
    assert "memory_per_agent_mb" not in rows[2]


def test_targets_are_judged_on_the_packed_rows():
    def row(mode, n, q, whole, gb, calls, rate):
        return {
            "mode": mode,
            "agents": n,
            "questions": q,
            "status": "ok",
            "whole_s": whole,
            "peak_pss_gb": gb,
            "calls": calls,
            "calls_per_s": rate,
        }

    rows = [
        row("packed", 1000, 2, 55.0, 2.9, 6000, 600.0),
        row("per-agent", 128, 4, 19.0, 1.6, 1536, 90.0),
        row("packed", 128, 4, 12.0, 1.2, 1536, 300.0),
        row("packed", 1000, 4, 99.0, 9.0, 12000, 1.0),
    ]
    big, mid = bench.check_targets(rows, ["per-agent", "packed"])
    assert big["met"] is True and big["by_mode"]["per-agent"] is None and big["calls"] == 6000
    assert mid["met"] is True and mid["by_mode"]["per-agent"] == {
        "checks": {"whole_s": True, "extra_gb": False},
        "met": False,
    }
    rows[0]["calls_per_s"] = 499.0
    assert bench.check_targets(rows, ["packed"])[0]["by_mode"]["packed"]["checks"]["calls_per_s"] is False
    assert bench.check_targets(rows[1:2], ["per-agent", "packed"])[0]["met"] is None  # no packed row


def test_process_titles():
    assert bench.process_title(["ray::AgentActor.run_turns()"], "python") == "AgentActor"
    assert bench.process_title(["ray::IDLE"], "python") == "IDLE"
    assert (
        bench.process_title(["/v/bin/python", "-u", "/v/ray/_private/log_monitor.py", "--x"], "python")
        == "log_monitor.py"
    )
    assert bench.process_title(["/v/ray/core/src/ray/raylet/raylet", "--a=1"], "raylet") == "raylet"
    assert bench.AGENT_TITLE.match("AgentActor") and bench.AGENT_TITLE.match("AgentGroupActor")
    assert not bench.AGENT_TITLE.match("CoordinatorActor")


def test_process_memory_of_this_process():
    mem = bench.process_memory(os.getpid())
    assert 0 < mem["uss"] <= mem["pss"] <= mem["rss"]
    assert bench.process_memory(2**22 + 12345) is None  # above Linux's pid_max: no such process


@pytest.mark.slow  # waits on a child process that lives 3 s
def test_the_sampler_sums_a_whole_tree_and_reaps_it():
    """A parent whose child holds 200 MB: the tree's PSS peak counts the child (a grandchild of this
    test), and every process seen is gone afterwards."""
    child = "import time; b = bytearray(200 * 2**20); time.sleep(3)"
    parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}])"
    proc = subprocess.Popen([sys.executable, "-c", parent])
    sampler = bench.TreeSampler(proc.pid, interval_s=0.1).start()
    proc.wait(timeout=30)
    sampler.stop()
    assert sampler.peak["procs"] == 2 and sampler.samples >= 5
    assert sampler.peak["pss"] > 200 * MB and sampler.peak["uss"] > 200 * MB
    assert sampler.peak["rss"] >= sampler.peak["pss"] >= sampler.peak["uss"]
    assert sum(sampler.titles.values()) == 2 and sampler.ray_in_tree() is False
    waited, killed = bench.reap(sampler.seen, grace_s=5)
    assert killed == [] and waited < 5


@pytest.mark.ray
@pytest.mark.slow  # the script end to end (~30 s); its pieces are tested above
def test_script_json_and_plot_on_a_tiny_run(tmp_path):
    """The script end to end at 3 agents, 1 question, per-agent: one real ``debate run`` on its own Ray,
    then a ``debate sweep`` over 2 and 3 agents."""
    out = tmp_path / "scale.json"
    assert (
        bench.main(
            [
                "--agents",
                "3",
                "--questions",
                "1",
                "--modes",
                "per-agent",
                "--settle-s",
                "0",
                "--quiet",
                "--sweep",
                "2,3",
                "--sweep-questions",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    r = json.loads(out.read_text())
    assert r["benchmark"] == "agent_scale" and r["simulated"] and r["commit"] and r["loadavg_before"]
    assert (
        r["machine"]["cpus"] >= 1 and r["machine"]["memory_total_gb"] > 0 and "--agents 3 --questions 1" in r["command"]
    )
    assert r["params"]["sizes"] == [[3, 1]] and list(r["params"]["modes"]) == ["per-agent"]
    (row,) = r["rows"]
    assert (
        row["status"] == "ok"
        and row["returncode"] == 0
        and (row["mode"], row["agents"], row["questions"]) == ("per-agent", 3, 1)
    )
    assert row["layout_args"] == ([] if not r["layout_flag"] else ["--agents-per-actor", "1"])
    assert (
        "--agents 3 " in row["command"] and "--limit 1 " in row["command"] and "--backend simulated" in row["command"]
    )
    assert row["calls"] == row["runs_n_calls"] == 3 * 3 * 1
    assert row["whole_s"] > row["debate_s"] > 0 and row["overhead_s"] == pytest.approx(
        row["whole_s"] - row["debate_s"], abs=1e-3
    )
    assert row["calls_per_s"] == pytest.approx(row["calls"] / row["debate_s"], abs=0.1)
    if row["timings_column"]:
        assert row["startup_s"] == pytest.approx(row["replicas_s"] + row["agents_s"])
    else:
        assert row["startup_s"] is None and row["debate_s"] == row["runs_wall_s"]
    # memory: the whole tree, Ray's own processes and each agent's actor included, counted by PSS
    assert row["ray_in_tree"] and {"raylet", "gcs_server"} <= set(row["process_titles"])
    assert row["agent_processes"] == 3 and row["peak_processes"] >= 3 + 4
    assert 0.1 < row["peak_uss_gb"] < row["peak_pss_gb"] < row["peak_rss_gb"]
    assert row["samples"] >= 10 and row["leftover_killed"] == [] and row["memory_per_agent_mb"] is None
    assert [t["agents"] for t in r["targets"]] == [1000, 128] and all(t["met"] is None for t in r["targets"])
    sw = r["sweep"]
    assert sw["status"] == "ok" and " sweep -q " in sw["command"] and sw["ray_in_tree"]
    assert [(c["agents"], c["calls"]) for c in sw["cells"]] == [(2, 2 * 3), (3, 3 * 3)] and sw["calls"] == 15
    assert all(c["debate_s"] > 0 for c in sw["cells"]) and sw["peak_pss_gb"] > 0.1
    png = Path(r["png"])
    assert (
        png == out.with_suffix(".png") and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    )


@pytest.mark.slow  # waits on child processes that live 1 s and more
def test_reap_waits_for_stragglers_then_kills_them_by_pid():
    import psutil

    short = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1)"])
    long = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    seen = {p.pid: (psutil.Process(p.pid).create_time(), name) for p, name in ((short, "short"), (long, "long"))}
    seen[2**22 + 7] = (0.0, "gone")  # a process that has already ended
    try:
        waited, killed = bench.reap(seen, grace_s=3)
        assert killed == ["long"] and 3 <= waited < 6
        assert short.wait(timeout=5) == 0 and long.wait(timeout=5) == -9
    finally:
        long.kill()
        long.wait()
