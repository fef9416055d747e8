"""A resumed run over a folder with an unreadable part (SIMULATED backend, real Ray): it sets the
part aside (:mod:`engine.bad_parts`), debates the questions it lost again, and ends with every
question exactly once, every call of each, and a folder that reads without --skip-bad-parts."""

import pyarrow.parquet as pq
import pytest

from actors.driver import DebateRunner
from engine.config import RunConfig
from engine.results import load, read_table
from engine.tasks import arithmetic_questions

pytestmark = pytest.mark.ray


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def part_of(out, qid):
    """The questions part holding ``qid``'s row."""
    return next(
        p for p in (out / "questions").glob("*.parquet") if qid in pq.read_table(p).column("question_id").to_pylist()
    )


def whole(out, qids):
    """Every question exactly once, with all its calls, read without the flag."""
    r = load(out)
    assert sorted(r.questions.question_id) == sorted(qids)
    assert len(r.calls) == r.questions.n_calls.sum() and r.notes == []


def test_a_resumed_run_debates_again_the_questions_of_an_unreadable_part(ray_local, tmp_path):
    cfg = RunConfig.flat(backend="simulated", agents=2, rounds=2, limit=4, progress=False, out=str(tmp_path / "out"))
    qs = arithmetic_questions(4, seed=0)
    qids = [q.qid for q in qs]
    out = tmp_path / "out"
    with DebateRunner() as runner:
        runner.run(cfg, questions=qs[:2])
        runner.run(cfg, questions=qs)  # two attempts: each wrote its own parts
        first, second = (part_of(out, qid) for qid in (qids[0], qids[2]))
        truncate(first)
        again = runner.run(cfg, questions=qs)
        assert again.resumed == 2  # the two questions of the truncated part were debated again
        assert first.with_name(first.name + ".unreadable").exists() and not first.exists()
        whole(out, qids)
        # a calls part of the second attempt: the questions that attempt finished are debated again
        calls = next(p for p in (out / "calls").glob(f"part-{second.name.split('-')[1]}-*.parquet"))
        truncate(calls)
        last = runner.run(cfg, questions=qs)
        assert last.resumed == 2 and last.summary["n_questions"] == 4
        assert second.with_name(second.name + ".superseded").exists()
    whole(out, qids)
    assert len(read_table(out, "runs")) == 1
