"""Kill `debate sweep` with SIGKILL mid-cell (twice, at random points), re-run it, and check that
every (run, question) is there exactly once with a complete set of calls.

The sweep runs as a subprocess in its own session (``start_new_session=True``) with its own local
Ray; a SIGKILLed driver would leave Ray's processes (gcs_server, raylet, workers; workers have
their own process groups) behind, so the test kills every process of the session and checks that
none survives.
"""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from app.sweep import MANIFEST, disk_status, expand, load_sweep
from engine.dataset_routing import load_questions
from engine.results import read_table
from tests.support.processes import DEBATE, _env, _kill_session

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]

AGENTS, ROUNDS, LIMIT = 4, 3, 30
SWEEP = {
    "backend": "simulated",
    "limit": LIMIT,
    "agents": AGENTS,
    "rounds": ROUNDS,
    "sim_latency_s": 0.01,
    "topology": "ring",
    "progress": False,
    "grid": {"protocol": ["mad", "sparse"], "seed": [1, 2]},
}


def _start(cfg: Path, out: Path, log: Path) -> subprocess.Popen:
    with open(log, "ab") as fh:
        return subprocess.Popen(
            [*DEBATE, "sweep", str(cfg), "--out", str(out)],
            cwd=cfg.parent,
            env=_env(),
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _n_calls(out: Path) -> int:
    return sum(read_table(d, "calls").num_rows for d in out.iterdir() if d.is_dir()) if out.is_dir() else 0


def _statuses(cells) -> list[str]:
    return [disk_status(c)[0] for c in cells]


def _run_and_kill(cfg: Path, out: Path, log: Path, cells, rng: random.Random) -> dict:
    """Start the sweep, wait until it has written new call rows, wait a random 0-4 s, then until
    a cell is half done (bounded), and SIGKILL the whole session."""
    t0 = time.monotonic()
    before = _n_calls(out)
    proc = _start(cfg, out, log)
    try:
        deadline = t0 + 150
        while _n_calls(out) <= before:
            assert proc.poll() is None, f"sweep ended before it wrote new rows:\n{log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, "no rows within 150 s"
            time.sleep(0.1)
        t_rows = time.monotonic() - t0
        time.sleep(rng.uniform(0.0, 4.0))
        deadline = time.monotonic() + 30
        while "partial" not in _statuses(cells):
            assert proc.poll() is None, "sweep finished before it could be killed mid-cell"
            assert time.monotonic() < deadline, "no half-done cell within 30 s"
            time.sleep(0.05)
        assert proc.poll() is None
        t_kill = time.monotonic() - t0
    finally:
        _kill_session(proc)
    statuses = _statuses(cells)
    return {
        "rows_after_s": round(t_rows, 2),
        "killed_after_s": round(t_kill, 2),
        "statuses": statuses,
        "calls_on_disk": _n_calls(out),
    }


@pytest.mark.slow  # a minute of SIGKILLed sweeps: CI runs it, the fast suite leaves it out
def test_sigkilled_sweep_resumes_without_duplicates(tmp_path):
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(yaml.safe_dump(SWEEP, sort_keys=False))
    out = tmp_path / "out"
    log = tmp_path / "sweep.log"
    cells = expand(load_sweep(cfg), out)
    assert len(cells) == 4
    seed = random.randrange(1_000_000)
    rng = random.Random(seed)
    timings = []
    for _ in range(2):  # two kills at different (random) points
        info = _run_and_kill(cfg, out, log, cells, rng)
        timings.append(info)
        assert info["statuses"].count("finished") < 4 and "partial" in info["statuses"], (seed, info)
        for d in (c.out for c in cells if c.out.is_dir()):  # a killed writer's leftovers do not break reads
            for t in ("calls", "questions", "graphs", "runs"):
                read_table(d, t)
    assert timings[1]["calls_on_disk"] > timings[0]["calls_on_disk"], (seed, timings)  # the second made progress

    t0 = time.monotonic()
    proc = _start(cfg, out, log)
    try:
        code = proc.wait(timeout=300)
    finally:
        _kill_session(proc)
    final_s = time.monotonic() - t0
    text = log.read_text()
    assert code == 0, f"seed {seed}: " + text[-3000:]
    assert "(resuming)" in text, f"seed {seed}"
    print(f"\nkill test seed {seed}: kills {timings}; final run {final_s:.1f} s")

    import json

    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["counts"] == {"finished": 4}
    attempts = set()
    for cell in cells:
        want = {q.qid for q in load_questions("arithmetic", None, LIMIT, cell.config.experiment.seed)}
        qs = read_table(cell.out, "questions").to_pandas()
        qs = qs[qs.run_id == cell.run_id]
        assert len(qs) == LIMIT and set(qs.question_id) == want  # each question exactly once, none missing
        runs = read_table(cell.out, "runs").to_pylist()
        assert [(r["run_id"], r["status"], r["n_questions"]) for r in runs] == [(cell.run_id, "finished", LIMIT)]
        calls = read_table(cell.out, "calls").to_pandas()
        keep = calls.merge(qs[["run_id", "question_id", "attempt"]], on=["run_id", "question_id", "attempt"])
        per_q = keep.groupby("question_id").size()
        assert len(per_q) == LIMIT and (per_q == AGENTS * ROUNDS).all()
        assert not keep.duplicated(["question_id", "round", "agent_id"]).any()
        # the question rows' token totals are the sums of exactly those calls
        tok = keep.groupby("question_id")["prompt_tokens"].sum().sort_index()
        assert list(tok) == list(qs.set_index("question_id")["prompt_tokens"].sort_index())
        attempts |= set(qs.attempt)
    assert len(attempts) >= 2  # questions were finished by different invocations
