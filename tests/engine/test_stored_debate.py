"""What a run stores of a debate: the question text, every agent call's group, and graphs whose
summaries are nodes of their own (GroupDebate, S2-MAD, MAD --memory summary), on the simulated
model through the engine's own driver (run_local) and the Parquet sink."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from actors.local_run import run_local
from backends.simulated_backend import SimulatedBackend
from engine.config import RunConfig
from engine.protocols.base import SUMMARIZER, summary_node
from engine.results import ParquetSink, read_edges, read_table
from engine.tasks import arithmetic_questions

LABELS = {"run_id": "r", "backend": "simulated", "simulated": True, "attempt": "a"}


def _run(n_q: int = 2, **kw):
    cfg = RunConfig.flat(backend="simulated", **kw)
    qs = arithmetic_questions(n_q, seed=3)
    return qs, run_local(cfg, qs, SimulatedBackend(reply_tokens=12, accuracy=0.5, follow=0.3))


def _store(tmp_path, rows):
    """Write the question rows, calls and graphs of ``rows`` (run_local's) as a run would."""
    sink = ParquetSink(tmp_path, flush_rows=10**6, flush_seconds=10**6)
    for row, log in rows:
        sink.write("questions", [{**row, **LABELS, "wall_s": 0.0}])
        sink.write("calls", [{**rec.to_row(), **LABELS} for rec in log.records])
        sink.write("graphs", [{**g, **LABELS} for g in log.graph_rows()])
    sink.flush()


def test_the_questions_table_stores_the_question_text(tmp_path):
    qs, rows = _run(protocol="mad", agents=2, rounds=2)
    _store(tmp_path, rows)
    stored = {r["question_id"]: r["question"] for r in read_table(tmp_path, "questions").to_pylist()}
    assert stored == {q.qid: q.text for q in qs} and all(stored.values())


def test_an_old_folder_reads_the_new_columns_as_null(tmp_path):
    """Parts written before ``questions.question`` and ``graphs.dst_group`` existed still read."""
    (tmp_path / "questions").mkdir()
    (tmp_path / "graphs").mkdir()
    old_q = pa.table({"run_id": ["r"], "question_id": ["q0"], "gold": ["2"], "correct": [True]})
    pq.write_table(old_q, tmp_path / "questions" / "part-old-00000.parquet")
    old_g = pa.table(
        {
            "run_id": ["r"],
            "question_id": ["q0"],
            "round": pa.array([1], pa.int32()),
            "dst": pa.array([-1], pa.int32()),
            "srcs": pa.array([[0, 1]], pa.list_(pa.int32())),
            "weights": pa.array([None], pa.list_(pa.float64())),
        }
    )
    pq.write_table(old_g, tmp_path / "graphs" / "part-old-00000.parquet")
    (q,) = read_table(tmp_path, "questions").to_pylist()
    assert q["question"] is None and q["gold"] == "2" and q["correct"] is True
    (g,) = read_table(tmp_path, "graphs").to_pylist()
    assert g["dst"] == -1 and g["srcs"] == [0, 1] and g["dst_group"] is None


def test_group_debate_records_every_agent_calls_group_and_summary_nodes(tmp_path):
    _, rows = _run(protocol="group", agents=4, rounds=4, groups="2+2", stage_rounds=2)
    _store(tmp_path, rows)
    (row, log) = rows[0]
    groups = json_groups(row)
    group_of = {a: j for j, g in enumerate(groups) for a in g}
    agent_calls = [r for r in log.records if r.agent_id != SUMMARIZER]
    assert agent_calls and all(r.group == group_of[r.agent_id] for r in agent_calls)
    summaries = [r for r in log.records if r.agent_id == SUMMARIZER]
    assert sorted({r.group for r in summaries}) == [0, 1]
    calls = read_table(tmp_path, "calls").to_pylist()
    assert all(c["group"] is not None for c in calls)  # summaries and agents alike

    graphs = [g for g in read_table(tmp_path, "graphs").to_pylist() if g["question_id"] == row["question_id"]]
    # each group's summary is its own node, reading its own group's agents
    by_summary = {g["dst"]: g for g in graphs if g["dst"] < 0}
    assert set(by_summary) == {summary_node(0), summary_node(1)} == {-1, -2}
    for j in (0, 1):
        assert sorted(by_summary[summary_node(j)]["srcs"]) == sorted(groups[j])
        assert by_summary[summary_node(j)]["dst_group"] == j
    # inter-group rounds read the summaries, never agents of other groups
    inter = [r for r in log.records if r.kind == "gd_inter"]
    assert inter
    inter_rounds = {r.round for r in inter}
    reads = [g for g in graphs if g["dst"] >= 0 and g["round"] in inter_rounds]
    assert reads and all(sorted(g["srcs"]) == [-2, -1] for g in reads)
    assert all(g["dst_group"] == group_of[g["dst"]] for g in reads)
    # intra-group rounds read group mates only
    intra = [g for g in graphs if g["dst"] >= 0 and g["round"] not in inter_rounds]
    assert intra and all(group_of[s] == group_of[g["dst"]] for g in intra for s in g["srcs"])
    edges = read_edges(tmp_path).to_pylist()
    assert {(e["src"], e["dst"]) for e in edges if e["round"] in inter_rounds} >= {(-1, 0), (-2, 0)}


def json_groups(row) -> list[list[int]]:
    import json

    return json.loads(row["protocol_info"])["groups"]


def test_s2mad_inter_group_calls_read_the_summaries_they_were_shown():
    _, rows = _run(n_q=4, protocol="s2mad", agents=4, rounds=3, groups="2+2", stage_rounds=1)
    seen = 0
    for row, log in rows:
        group_of = {a: j for j, g in enumerate(json_groups(row)) for a in g}
        assert all(r.group == group_of[r.agent_id] for r in log.records if r.agent_id != SUMMARIZER)
        inter_rounds = {r.round for r in log.records if r.kind in ("s2_inter", "gd_inter")}
        for reads in log.reads:
            if reads.dst >= 0 and reads.round in inter_rounds:
                assert reads.srcs and all(s < 0 for s in reads.srcs)  # summary nodes only
                seen += 1
    assert seen


def test_other_protocols_leave_the_group_null():
    _, rows = _run(protocol="mad", agents=3, rounds=2)
    assert all(r.group is None for _, log in rows for r in log.records)
    assert all(reads.group is None for _, log in rows for reads in log.reads)


def test_mad_summary_memory_reads_its_own_summary_node():
    _, rows = _run(protocol="mad", agents=3, rounds=2, memory="summary")
    log = rows[0][1]
    summaries = [r for r in log.reads if r.dst < 0]
    turns = [r for r in log.reads if r.dst >= 0]
    assert summaries and turns
    # agent i reads the summary made for it (SummaryCall group i), which read i's peers
    assert all(t.srcs == [summary_node(t.dst)] for t in turns)
    assert {s.dst for s in summaries} == {summary_node(t.dst) for t in turns}
