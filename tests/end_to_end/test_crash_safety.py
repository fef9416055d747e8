"""Crash-safe results: processes SIGKILLed at random points leave a readable directory, and a
resumed ``debate run`` finishes with every question exactly once.

Two levels: (1) a bare :class:`ParquetSink` writing parts in a tight loop is killed at random
moments, so some kills land in the middle of a Parquet write; (2) the real CLI, ``debate run``
on local Ray, is killed at random points and re-run until it finishes.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time

import pytest

from engine.dataset_routing import load_questions
from engine.results import read_table
from tests.support.paths import ROOT
from tests.support.processes import DEBATE, _env, _kill_session

WRITER = """
import sys, itertools
from engine.results import ParquetSink
from tests.support.rows import complete_rows
sink = ParquetSink(sys.argv[1], flush_rows=50, flush_seconds=0.0, name=sys.argv[2])
text = "x" * 2000  # big rows: each part takes a while to write, so kills often land mid-write
for i in itertools.count():
    rows = [{"run_id": "r", "question_id": f"{sys.argv[2]}-{i}", "round": j, "agent_id": 0,
             "text": text, "prompt_tokens": i} for j in range(50)]
    sink.write("calls", complete_rows("calls", rows))
"""


@pytest.mark.slow  # 20 SIGKILLs at random points: CI runs it, the fast suite leaves it out
@pytest.mark.timeout(300)
def test_sink_killed_at_random_points_never_leaves_a_corrupt_part(tmp_path):
    seed = random.randrange(1_000_000)
    rng = random.Random(seed)
    out = tmp_path / "out"
    seen = 0
    for k in range(8):  # bounded loop of kills at random moments
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(out), f"w{k}"], cwd=ROOT, start_new_session=True)
        deadline = time.monotonic() + 60
        while not list((out / "calls").glob(f"part-w{k}-*.parquet")):  # started writing
            assert proc.poll() is None and time.monotonic() < deadline, f"seed {seed}: writer {k} did not start"
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.7))
        _kill_session(proc)
        table = read_table(out, "calls")  # must not raise on whatever the kill left
        rows = table.to_pylist()
        assert len(rows) > seen, f"seed {seed}: kill {k} lost rows already on disk"
        seen = len(rows)
        # whole parts only: every part holds complete 50-row batches of one question id
        by_q: dict[str, list[int]] = {}
        for r in rows:
            by_q.setdefault(r["question_id"], []).append(r["round"])
        assert all(sorted(v) == list(range(50)) for v in by_q.values()), f"seed {seed}: a partial part was read"
    leftovers = list((out / "calls").glob(".*.tmp"))
    print(f"\nsink kill seed {seed}: {seen} rows in whole parts, {len(leftovers)} unfinished temporary files ignored")


LIMIT, AGENTS, ROUNDS = 40, 3, 3  # ~10 s of Ray start-up, then ~17 s of debate here


@pytest.mark.ray
@pytest.mark.slow  # a minute of repeated kills: CI runs it, the fast suite leaves it out
@pytest.mark.timeout(900)
def test_debate_run_killed_at_random_points_resumes_to_each_question_once(tmp_path):
    seed = random.randrange(1_000_000)
    rng = random.Random(seed)
    out = tmp_path / "run"
    log = tmp_path / "run.log"
    argv = [
        *DEBATE,
        "run",
        "--backend",
        "simulated",
        "--protocol",
        "mad",
        "--agents",
        str(AGENTS),
        "--rounds",
        str(ROUNDS),
        "--limit",
        str(LIMIT),
        "--sim-latency-s",
        "0.05",
        "--max-concurrent-questions",
        "4",
        "--no-progress",
        "--out",
        str(out),
    ]

    def on_disk() -> int:
        return read_table(out, "questions").num_rows if out.exists() else 0

    kills = []
    for k in range(3):
        with open(log, "ab") as fh:
            proc = subprocess.Popen(
                argv, cwd=tmp_path, env=_env(), stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
            )
        t0, before = time.monotonic(), on_disk()
        if k == 0:  # anywhere in the first seconds: Ray start-up, actor creation, first rounds
            time.sleep(rng.uniform(1.0, 8.0))
        else:  # after this launch has written new question rows, plus a random 0-3 s
            while on_disk() <= before and proc.poll() is None:
                assert time.monotonic() - t0 < 180, f"seed {seed}: no new question rows within 180 s"
                time.sleep(0.1)
            time.sleep(rng.uniform(0.0, 3.0))
        finished = proc.poll() is not None
        _kill_session(proc)
        for t in ("calls", "questions", "graphs", "runs"):  # readable after every kill
            if out.exists():
                read_table(out, t)
        kills.append((round(time.monotonic() - t0, 1), on_disk(), finished))
    with open(log, "ab") as fh:
        code = subprocess.run(
            argv, cwd=tmp_path, env=_env(), stdout=fh, stderr=subprocess.STDOUT, timeout=600
        ).returncode
    print(f"\nrun kill seed {seed}: (kill after s, questions on disk, had finished) {kills}")
    assert code == 0, f"seed {seed}: " + log.read_text()[-3000:]
    assert any(0 < n < LIMIT for _, n, _ in kills), f"seed {seed}: no kill landed mid-run: {kills}"
    want = {q.qid for q in load_questions("arithmetic", None, LIMIT, 0)}
    qs = read_table(out, "questions").to_pandas()
    assert len(qs) == LIMIT and set(qs.question_id) == want and qs.run_id.nunique() == 1, (seed, kills)
    calls = read_table(out, "calls").to_pandas()
    keep = calls.merge(qs[["run_id", "question_id", "attempt"]], on=["run_id", "question_id", "attempt"])
    assert (keep.groupby("question_id").size() == AGENTS * ROUNDS).all() and keep.question_id.nunique() == LIMIT
    assert not keep.duplicated(["question_id", "round", "agent_id"]).any()
    runs = read_table(out, "runs").to_pylist()
    assert [(r["status"], r["n_questions"]) for r in runs] == [("finished", LIMIT)]
