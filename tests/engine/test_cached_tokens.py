"""Cached prompt tokens (``calls.cached_prompt_tokens``): a backend's per-request count of prompt
tokens its prefix cache served, carried through the agent to the calls table, summed per question
and run over the calls that know it (unknown is null, never 0), shown by the printed run summary,
``debate report`` and ``debate show``; folders written before the column existed read it as null.
No Ray, no model: simulated-model runs made in-process (``tests.support.result_dirs``)."""

from __future__ import annotations

import asyncio
import csv
import re
import shutil

import pyarrow.parquet as pq
import pytest

from app.cli import main
from app.report import COLUMNS, build_report, format_row, markdown_tables
from backends.simulated_backend import SimulatedBackend
from engine.accounting import summarize
from engine.debate import DebateLog
from engine.metrics import runs_columns
from engine.protocols.base import Outcome
from engine.records import CallRecord, GenResult
from engine.results import load, read_table
from engine.tasks import Question
from tests.support.result_dirs import simulated_run

N_QUESTIONS = 3
# the columns this change added, per table: an older folder's parts lack them
NEW_COLUMNS = {
    "calls": ["cached_prompt_tokens"],
    "questions": ["cached_prompt_tokens", "computed_prompt_tokens"],
    "runs": ["cached_prompt_tokens", "computed_prompt_tokens", "cached_prompt_share"],
}


class PrefixCachingSim(SimulatedBackend):
    """The simulated model, reporting the first half of every prompt (rounded down) as served
    from a prefix cache, as vLLM reports its hits."""

    def generate(self, requests):
        out = super().generate(requests)
        for res in out:
            res.cached_prompt_tokens = res.prompt_tokens // 2
        return out


@pytest.fixture(scope="module")
def cached_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("cached")
    backend = PrefixCachingSim(reply_tokens=12, accuracy=0.5, follow=0.3)
    simulated_run(out, n_questions=N_QUESTIONS, backend=backend, protocol="mad", agents=3, rounds=2)
    return out


@pytest.fixture(scope="module")
def plain_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("plain")
    simulated_run(out, n_questions=N_QUESTIONS, protocol="mad", agents=3, rounds=2)
    return out


@pytest.fixture
def old_dir(cached_dir, tmp_path):
    """The cached run's folder as a version before the column wrote it: every part without it."""
    old = tmp_path / "old"
    shutil.copytree(cached_dir, old)
    for table, columns in NEW_COLUMNS.items():
        for part in (old / table).glob("*.parquet"):
            pq.write_table(pq.read_table(part).drop_columns(columns), part)
    return old


def _record(agent: int, prompt: int, cached: int | None, error: str | None = None) -> CallRecord:
    rec = CallRecord("q", 0, agent, "first", "m", [], "", "1", prompt, 2, 0.0, "stop", error, 0, 0.0)
    rec.cached_prompt_tokens = cached
    return rec


def _question_row(*records: CallRecord) -> dict:
    log = DebateLog(Question("q", "numeric", "1+0?", "1"))
    log.records += records
    return log.question_row(Outcome("1", [["1"] * len(records)]), len(records))


# ----------------------------------------------------------------------------- per call and question
def test_each_call_stores_its_backends_count_and_each_question_the_sums(cached_dir):
    calls = read_table(cached_dir, "calls").to_pandas()
    assert len(calls) == N_QUESTIONS * 3 * 2
    assert (calls.cached_prompt_tokens == calls.prompt_tokens // 2).all()
    questions = read_table(cached_dir, "questions").to_pandas().set_index("question_id")
    by_q = calls.groupby("question_id")
    assert questions.cached_prompt_tokens.to_dict() == by_q.cached_prompt_tokens.sum().to_dict()
    computed = (calls.prompt_tokens - calls.cached_prompt_tokens).groupby(calls.question_id).sum()
    assert questions.computed_prompt_tokens.to_dict() == computed.to_dict()


def test_a_backend_that_cannot_say_stores_null_never_zero(plain_dir):
    assert SimulatedBackend().generate([_request()])[0].cached_prompt_tokens is None
    calls = read_table(plain_dir, "calls").to_pandas()
    questions = read_table(plain_dir, "questions").to_pandas()
    assert calls.cached_prompt_tokens.isna().all() and calls.prompt_tokens.gt(0).all()
    assert questions.cached_prompt_tokens.isna().all() and questions.computed_prompt_tokens.isna().all()


def _request():
    from engine.records import GenRequest

    return GenRequest(messages=[{"role": "user", "content": "What is 1+1?"}], meta={"gold": "2", "task": "numeric"})


def test_a_question_sums_only_the_calls_that_know_their_cached_tokens():
    row = _question_row(_record(0, 100, 60), _record(1, 80, None), _record(2, 0, None, error="boom"))
    assert (row["prompt_tokens"], row["cached_prompt_tokens"], row["computed_prompt_tokens"]) == (180, 60, 40)
    row = _question_row(_record(0, 100, 0), _record(1, 50, None))  # a known 0 stays 0
    assert (row["cached_prompt_tokens"], row["computed_prompt_tokens"]) == (0, 100)
    row = _question_row(_record(0, 100, None), _record(1, 50, None))
    assert row["cached_prompt_tokens"] is None and row["computed_prompt_tokens"] is None


# ----------------------------------------------------------------------------- the run summary
def test_the_run_summary_sums_known_questions_and_says_na_when_none_knows():
    s = summarize(
        [
            {"prompt_tokens": 100, "cached_prompt_tokens": 30, "computed_prompt_tokens": 70},
            {"prompt_tokens": 50, "cached_prompt_tokens": None, "computed_prompt_tokens": None},
            {"prompt_tokens": 40},  # an older row, without the columns
        ]
    )
    assert (s["cached_prompt_tokens"], s["computed_prompt_tokens"]) == (30, 70)
    assert s["cached_prompt_share"] == pytest.approx(0.3)
    stored = runs_columns(s)
    assert (stored["cached_prompt_tokens"], stored["computed_prompt_tokens"]) == (30, 70)
    assert stored["cached_prompt_share"] == pytest.approx(0.3)
    assert "cached_prompt_share" not in runs_columns(s, graded=True)  # rescore leaves it as the run wrote it
    none = summarize([{"prompt_tokens": 50, "cached_prompt_tokens": None}, {"prompt_tokens": 40}])
    assert none["cached_prompt_tokens"] is None and none["cached_prompt_share"] is None


def test_the_printed_summary_shows_the_cached_sum_and_share_or_na():
    from types import SimpleNamespace

    from app.cli import summary_rows
    from engine.config import RunConfig

    def printed(rows):
        result = SimpleNamespace(summary=summarize(rows), wall_s=1.0, simulated=True, out_dir="o", backend="x")
        return dict(summary_rows(result, RunConfig()))

    known = printed([{"prompt_tokens": 200, "cached_prompt_tokens": 90, "computed_prompt_tokens": 110}])
    assert known["cached prompt tokens"] == "90" and known["computed prompt tokens"] == "110"
    assert known["cached share of prompt tokens"] == "45.0%"
    unknown = printed([{"prompt_tokens": 200}])
    assert unknown["cached prompt tokens"] == unknown["cached share of prompt tokens"] == "n/a"


# ----------------------------------------------------------------------------- debate report
def test_report_shows_prompt_cached_and_computed_tokens_per_question(cached_dir, tmp_path):
    calls = read_table(cached_dir, "calls").to_pandas()
    cached, prompt = int(calls.cached_prompt_tokens.sum()), int(calls.prompt_tokens.sum())
    (row,) = build_report(cached_dir, tmp_path / "r", figures=False).rows
    assert (row["cached_prompt_tokens"], row["computed_prompt_tokens"]) == (cached, prompt - cached)
    assert row["cached_per_q"] == pytest.approx(cached / N_QUESTIONS)
    assert row["computed_per_q"] == pytest.approx((prompt - cached) / N_QUESTIONS)
    assert row["cached_share"] == pytest.approx(cached / prompt)
    cells = dict(zip(COLUMNS, format_row(row)))
    assert cells["cached tok/q"] == f"{cached / N_QUESTIONS:,.1f}"
    assert cells["computed tok/q"] == f"{(prompt - cached) / N_QUESTIONS:,.1f}"
    assert cells["cached share"] == f"{100 * cached / prompt:.1f}%"
    md = markdown_tables([row])
    assert "### cache" in md and "| cached tok/q | computed tok/q | cached share |" in md


def test_report_computes_only_over_calls_that_know_and_says_na_without_any(plain_dir, tmp_path):
    (row,) = build_report(plain_dir, tmp_path / "r", figures=False).rows
    assert row["cached_prompt_tokens"] is None and row["cached_share"] is None and row["prompt_per_q"] > 0
    cells = dict(zip(COLUMNS, format_row(row)))
    assert cells["cached tok/q"] == cells["computed tok/q"] == cells["cached share"] == "n/a"


# ----------------------------------------------------------------------------- debate show
def _show(capsys, monkeypatch, *args):
    monkeypatch.setenv("COLUMNS", "160")
    code = main(["show", *map(str, args)])
    return code, capsys.readouterr().out


def test_show_prints_each_calls_cached_tokens_next_to_its_token_counts(cached_dir, capsys, monkeypatch):
    r = load(cached_dir)
    q = r.questions.question_id.iloc[0]
    calls = r.calls[r.calls.question_id == q]
    code, out = _show(capsys, monkeypatch, cached_dir, "--question", q)
    assert code == 0
    headers = [line for line in out.splitlines() if "tok p/c" in line]
    assert len(headers) == 2 and all(re.search(r"tok p/c\s*┃\s*cached$", line) for line in headers)
    for c in calls.itertuples():  # the tokens cell, then the cached cell, ending the row
        cells = rf"{c.prompt_tokens}/{c.completion_tokens}\s*│\s*{c.cached_prompt_tokens}$"
        assert re.search(cells, out, re.MULTILINE), cells
    assert f"({calls.cached_prompt_tokens.sum()} prompt tokens cached)" in out


def test_show_leaves_the_column_out_when_no_call_knows(plain_dir, capsys, monkeypatch):
    code, out = _show(capsys, monkeypatch, plain_dir)
    assert code == 0 and "tok p/c" in out and "cached" not in out


# ----------------------------------------------------------------------------- folders without the column
def test_an_old_folder_reads_the_column_as_null_everywhere(old_dir, tmp_path, capsys, monkeypatch):
    assert "cached_prompt_tokens" not in pq.read_schema(next((old_dir / "calls").glob("*.parquet"))).names
    r = load(old_dir)
    assert len(r.calls) == N_QUESTIONS * 6 and r.calls.cached_prompt_tokens.isna().all()
    assert r.questions.cached_prompt_tokens.isna().all() and r.runs.cached_prompt_share.isna().all()
    assert any("calls lacks cached_prompt_tokens" in note for note in r.notes)
    code, out = _show(capsys, monkeypatch, old_dir)
    assert code == 0 and "tok p/c" in out and "cached" not in out
    assert main(["report", str(old_dir), "--out", str(tmp_path / "rep"), "--format", "csv", "--no-figures"]) == 0
    report = capsys.readouterr().out
    assert report.splitlines()[0].endswith("cached tok/q,computed tok/q,cached share")
    assert report.splitlines()[1].endswith("n/a,n/a,n/a")
    assert main(["rescore", str(old_dir)]) == 0
    assert main(["export", str(old_dir), "--to", str(tmp_path / "calls.csv"), "--table", "calls"]) == 0
    with open(tmp_path / "calls.csv", newline="") as fh:
        exported = list(csv.DictReader(fh))
    assert len(exported) == N_QUESTIONS * 6 and all(row["cached_prompt_tokens"] == "" for row in exported)


# ----------------------------------------------------------------------------- the agent and the reply cache
class _Remote:
    def __init__(self, fn):
        self.remote = fn


class _Replica:
    """A replica handle answering each request with 40 prompt tokens, 25 of them cached."""

    def __init__(self):
        self.generate_stream = _Remote(self._stream)

    async def _stream(self, requests):
        async def chunk():
            return [
                (i, GenResult("The answer is 2", 40, 4, 0.0, cached_prompt_tokens=25)) for i, _ in enumerate(requests)
            ]

        yield chunk()


class _Cache:
    """A first-round cache that holds one reply: the first asker generates, later ones reuse it."""

    def __init__(self):
        self.reply = None
        self.acquire = _Remote(self._acquire)
        self.put = _Remote(self._put)

    async def _acquire(self, key):
        return self.reply

    async def _put(self, key, res):
        self.reply = res


def test_the_agent_records_the_replicas_count_and_a_reused_reply_as_unknown():
    """Through the agent actor's own code (no Ray): a generated reply keeps its cached count; the
    same reply reused from the first-round cache made no request, so its count is null."""
    from actors.agent_actor import AgentGroupActor, AgentSetup
    from engine.config import RunConfig
    from engine.prompts import PromptSet
    from engine.protocols import AgentCall
    from engine.records import Turn

    spec = RunConfig.flat(agents=1, backend="simulated").agent_specs()[0]
    group = AgentGroupActor.__ray_metadata__.modified_class()
    group.configure([AgentSetup(0, spec, PromptSet.for_task("numeric"), True, _Replica(), cache=_Cache())])
    question = Question("q1", "numeric", "What is 1+1?", "2")

    def turn(round_):
        return Turn(question, AgentCall(agent=0, stage="first" if round_ == 0 else "debate"), round_, key=7)

    async def three():
        return [await group.turn(turn(0)), await group.turn(turn(0)), await group.turn(turn(1))]

    generated, reused, later = (out.record for out in asyncio.run(three()))
    assert (generated.reused, generated.cached_prompt_tokens, generated.prompt_tokens) == (False, 25, 40)
    assert (reused.reused, reused.cached_prompt_tokens, reused.prompt_tokens) == (True, None, 40)
    assert later.cached_prompt_tokens == 25 and later.to_row()["cached_prompt_tokens"] == 25
