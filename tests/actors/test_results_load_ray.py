"""``engine.results.load``, ``debate export`` and the README's results example on real Ray runs
(SIMULATED backend), the way a user reads a ``runs/`` folder after ``debate run``."""

import os
import re
from pathlib import Path

import pandas as pd
import pytest

from actors.driver import run
from app.cli import main
from engine.config import RunConfig
from engine.results import load, read_table, write_part

pytestmark = pytest.mark.ray

README = Path(__file__).resolve().parents[2] / "docs" / "howto" / "results.md"


@pytest.fixture(scope="module")
def runs_dir(ray_local, tmp_path_factory):
    """``runs/`` holding a MAD and a sparse run (5 agents, 2 rounds, 4 questions each)."""
    root = tmp_path_factory.mktemp("results") / "runs"
    base = dict(backend="simulated", limit=4, agents=5, rounds=2, progress=False)
    run(RunConfig.flat(protocol="mad", out=str(root / "20260101-000000"), **base))
    run(RunConfig.flat(protocol="sparse", density=0.5, out=str(root / "20260101-000100"), **base))
    return root


def test_load_matches_what_the_runs_stored(runs_dir):
    r = load(runs_dir)
    assert sorted(r.runs.protocol) == ["mad", "sparse"] and (r.runs.status == "finished").all()
    assert len(r.questions) == 8 and r.notes == []
    acc = r.questions.groupby(["protocol", "agents"]).correct.mean()
    stored = r.runs.set_index("protocol").accuracy
    assert acc.loc["mad", 5] == stored["mad"] and acc.loc["sparse", 5] == stored["sparse"]
    assert set(r.questions.rounds) == {2} and r.runs.set_index("protocol").density.to_dict()["sparse"] == 0.5
    # every call of every question, tokens adding up to the runs' totals
    assert len(r.calls) == r.questions.n_calls.sum()
    tokens = r.calls.groupby("run_id").prompt_tokens.sum()
    assert tokens.to_dict() == r.runs.set_index("run_id").prompt_tokens.to_dict()
    assert len(r.graphs) and set(r.graphs.run_id) == set(r.runs.run_id)


def test_every_call_rebuilds_from_the_prompts_table(runs_dir):
    """Agent groups ship each message's text once and the writer stores it once per run: every
    key a call names is in the prompts table, nothing else is, and a call rebuilds its transcript."""
    r = load(runs_dir)
    assert r.calls.prompt.notna().all()
    named = {(run, k) for run, keys in zip(r.calls.run_id, r.calls.prompt) for k in keys}
    assert named == set(zip(r.prompts.run_id, r.prompts.message))
    for run_dir in r.runs.run_dir:
        stored = read_table(run_dir, "prompts").column("message").to_pylist()
        assert len(stored) == len(set(stored))
    c = r.calls
    later = c[(c["round"] == 1) & (c.agent_id == 0)].iloc[0]
    first = c[(c["round"] == 0) & (c.agent_id == 0) & (c.question_id == later.question_id) & (c.run_id == later.run_id)]
    (first_msgs,), msgs = [r.messages(row) for _, row in first.iterrows()], r.messages(later)
    assert msgs[0] == first_msgs[0] and msgs[0]["role"] == "user"  # the question, as first sent
    assert msgs[1] == {"role": "assistant", "content": first.iloc[0].text} and msgs[2]["role"] == "user"


def test_a_resumed_run_leaves_out_its_interrupted_attempt(runs_dir, tmp_path):
    """What a killed attempt leaves behind (calls and graph rows of a question it never finished,
    under another attempt id) is not loaded; the question's finished attempt is."""
    before = load(runs_dir)
    mad_dir = Path(before.runs.set_index("protocol").run_dir["mad"])
    calls = read_table(mad_dir, "calls").to_pylist()[:3]
    graphs = read_table(mad_dir, "graphs").to_pylist()[:2]
    write_part(mad_dir / "calls" / "part-killed-00000.parquet", "calls", [{**c, "attempt": "killed"} for c in calls])
    write_part(mad_dir / "graphs" / "part-killed-00000.parquet", "graphs", [{**g, "attempt": "killed"} for g in graphs])
    try:
        after = load(runs_dir)
        assert len(read_table(mad_dir, "calls")) == len(before.calls[before.calls.run_dir == str(mad_dir)]) + 3
        assert len(after.calls) == len(before.calls) and len(after.graphs) == len(before.graphs)
        assert "killed" not in set(after.calls.attempt) | set(after.graphs.attempt)
    finally:
        for t in ("calls", "graphs"):
            (mad_dir / t / "part-killed-00000.parquet").unlink()


def test_readme_results_example_runs_as_written(runs_dir, capsys):
    """The docs' Python block (docs/howto/results.md) that uses engine.results.load, run from the
    folder holding runs/."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    (snippet,) = [b for b in blocks if "from engine.results import load" in b]
    cwd = os.getcwd()
    os.chdir(runs_dir.parent)
    try:
        exec(compile(snippet, str(README), "exec"), {})
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert "mad" in out and "sparse" in out and "prompt_tokens" in out and "finished" in out


def test_export_writes_the_loaded_table(runs_dir, tmp_path, capsys):
    r = load(runs_dir)
    assert main(["export", str(runs_dir), "--to", str(tmp_path / "q.parquet")]) == 0
    q = pd.read_parquet(tmp_path / "q.parquet")
    assert len(q) == len(r.questions) == 8 and {"agents", "rounds", "density", "seed", "model"} <= set(q.columns)
    assert q.groupby("protocol").correct.mean().to_dict() == r.runs.set_index("protocol").accuracy.to_dict()
    assert main(["export", str(runs_dir), "--to", str(tmp_path / "c.csv"), "--table", "calls"]) == 0
    c = pd.read_csv(tmp_path / "c.csv")
    assert len(c) == len(r.calls) and c.prompt_tokens.sum() == r.calls.prompt_tokens.sum()
    assert "wrote 8 questions rows" in capsys.readouterr().out
