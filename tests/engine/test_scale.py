"""A debate of 1,000 agents: every pure path gives the same results as the per-element
definitions, in the compact graphs layout, without per-edge Python objects or O(N |E|)
centralities. (No timing asserts: the machine is shared; the numbers are in the commits.)"""

from __future__ import annotations

import dataclasses
import math
import random

import networkx as nx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from actors.local_run import run_local
from backends.simulated_backend import SimulatedBackend
from engine.config import RunConfig
from engine.debate import DebateLog
from engine.prompts import PromptSet
from engine.protocols import AgentCall
from engine.records import CallRecord, TurnResult
from engine.results import EDGES_SCHEMA, ParquetSink, graph_edges, read_edges, read_table
from engine.tasks import arithmetic_questions
from engine.word_tokens import count_words as _words
from tests.support.rows import complete_rows
from topologies import centrality_order, fully_connected, make_topology, possible_regular_densities, regular, ring, star
from topologies.cortex import by_weight, mean_incoming, prune, trust, weight_matrix
from topologies.groups import dedup, differing, similar_by_answer
from topologies.placement import assign_models, placement_order

N = 1000
LABELS = {"run_id": "r", "backend": "simulated", "simulated": True, "attempt": "a"}


def _record(agent: int, peers: list[int]) -> TurnResult:
    return TurnResult(CallRecord("q", 1, agent, "debate", "m", peers, "t", "1", 1, 1, 0.0, "stop", None, 0, 0.7))


# ----------------------------------------------------------------------------- graphs table
def test_full_round_is_one_graph_row_per_reader_and_reads_back_edge_for_edge(tmp_path):
    log = DebateLog(arithmetic_questions(1, seed=0)[0])
    reads = fully_connected(N).peers(1)
    for i in range(N):
        log.add(1, AgentCall(agent=i, stage="debate", peers=reads[i]), _record(i, reads[i]))
    log.add(1, AgentCall(agent=5, stage="debate", peers=[1, 2], weights=[0.5, 1.0]), _record(5, [1, 2]))
    rows = log.graph_rows()
    assert len(log.reads) == len(rows) == N + 1  # one entry per call, not 999,000 edges
    assert rows[0]["srcs"] == list(range(1, N)) and rows[0]["weights"] is None  # all weights 1.0: null
    assert log.graph_rows(N) == rows[N:]  # a step streams its own calls only
    sink = ParquetSink(tmp_path, flush_rows=400)
    sink.write("graphs", [{**r, **LABELS} for r in rows])
    sink.flush()
    assert read_table(tmp_path, "graphs").num_rows == N + 1
    edges = read_edges(tmp_path)
    assert edges.num_rows == N * (N - 1) + 2
    got = list(zip(*(edges.column(c).to_pylist() for c in ("round", "src", "dst", "weight"))))
    assert got == log.edges  # the same edges, in the same order, as one row per edge
    assert got[-2:] == [(1, 1, 5, 0.5), (1, 2, 5, 1.0)]


def test_run_directories_in_the_old_one_row_per_edge_layout_still_read(tmp_path):
    (tmp_path / "graphs").mkdir()
    old = [
        {"question_id": "q0", "round": 1, "src": 3, "dst": 4, "weight": 1.0, **LABELS},
        {"question_id": "q0", "round": 1, "src": 5, "dst": 4, "weight": 0.25, **LABELS},
    ]
    pq.write_table(pa.Table.from_pylist(old, schema=EDGES_SCHEMA), tmp_path / "graphs" / "part-old-00000.parquet")
    sink = ParquetSink(tmp_path)
    sink.write(
        "graphs",
        complete_rows(
            "graphs", [{"question_id": "q1", "round": 2, "dst": -1, "srcs": [0, 1], "weights": None, **LABELS}]
        ),
    )
    sink.flush()
    compact = read_table(tmp_path, "graphs", ["question_id", "dst", "srcs", "weights"]).to_pylist()
    assert compact == [
        {"question_id": "q1", "dst": -1, "srcs": [0, 1], "weights": None},
        {"question_id": "q0", "dst": 4, "srcs": [3], "weights": None},
        {"question_id": "q0", "dst": 4, "srcs": [5], "weights": [0.25]},
    ]
    edges = [
        {k: r[k] for k in ("question_id", "round", "src", "dst", "weight")} for r in read_edges(tmp_path).to_pylist()
    ]
    assert edges == [
        {"question_id": "q1", "round": 2, "src": 0, "dst": -1, "weight": 1.0},
        {"question_id": "q1", "round": 2, "src": 1, "dst": -1, "weight": 1.0},
        *({k: r[k] for k in ("question_id", "round", "src", "dst", "weight")} for r in old),
    ]
    assert graph_edges(read_table(tmp_path / "missing", "graphs")).num_rows == 0


def test_call_rows_are_shallow_copies():
    rec = _record(3, [0, 1, 2]).record
    row = rec.to_row()
    assert row == dataclasses.asdict(rec) and row["peers"] is not rec.peers


# ----------------------------------------------------------------------------- a 1,000-agent debate
@pytest.mark.slow  # a million edges; the full-round test above takes the same path at a smaller size
def test_full_mad_of_1000_agents_runs_and_records_its_million_edges_compactly():
    cfg = RunConfig.flat(protocol="mad", agents=N, rounds=2, backend="simulated")
    ((row, log),) = run_local(cfg, arithmetic_questions(1, seed=2), SimulatedBackend(reply_tokens=8))
    assert row["n_calls"] == 2 * N and row["rounds_run"] == 2
    assert len(log.reads) == N and all(len(r.srcs) == N - 1 and r.dst not in r.srcs for r in log.reads)
    # the simulated model counted every whitespace token of a prompt that shows 999 replies
    first = [r for r in log.records if r.round == 1][0]
    assert first.prompt_tokens > (N - 1) * 8


@pytest.mark.parametrize(
    "kind, density",
    [
        ("regular", 10 / 999),
        ("regular", 500 / 999),
        ("regular", 989 / 999),
        ("full", None),
        ("ring", None),
        ("star", None),
    ],
)
def test_topologies_of_1000_agents(kind, density):
    topo = make_topology(kind, N, density=density)
    peers = topo.peers(1)
    degrees = {len(p) for i, p in peers.items() if not (kind == "star" and i == 0)}
    assert len(degrees) == 1 and all(i not in p and p == sorted(p) for i, p in peers.items())
    if kind == "regular":
        assert degrees == {round(density * (N - 1))} and topo.density == pytest.approx(density)
    assert all(i in peers[j] for i, p in peers.items() for j in p[:3])  # mutual reading


@pytest.mark.parametrize("n", [1, 2, 3, 6, 7, 12])
def test_circulant_topologies_are_networkx_circulant_graphs(n):
    for k, d in [(0, 0.0), *possible_regular_densities(n)]:
        offsets = list(range(1, k // 2 + 1)) + ([n // 2] if k % 2 else [])
        want = sorted((min(u, v), max(u, v)) for u, v in nx.circulant_graph(n, offsets).edges()) if offsets else []
        topo = regular(n, d)
        assert topo.edges() == want and sorted(map(sorted, topo.base_graph.edges())) == [list(e) for e in want]
    assert fully_connected(n).edges() == sorted(nx.complete_graph(n).edges())
    assert ring(n).edges() == sorted(
        (min(u, v), max(u, v)) for u, v in (nx.cycle_graph(n) if n >= 3 else nx.path_graph(n)).edges()
    )


def test_placement_on_1000_agents_needs_no_betweenness(monkeypatch):
    def slow(*_, **__):
        raise AssertionError("betweenness computed")

    monkeypatch.setattr(nx, "betweenness_centrality", slow)
    ranked = ["big"] * 10 + ["small"] * (N - 10)
    for topo in (ring(N), regular(N, 500 / 999), fully_connected(N), make_topology("probmad", N, density=0.2)):
        assert placement_order(topo, "central") == placement_order(topo, "peripheral") == list(range(N))
    hub = star(N, center=7)
    assert placement_order(hub, "central") == [7] + [i for i in range(N) if i != 7]
    assert placement_order(hub, "peripheral") == [i for i in range(N) if i != 7] + [7]
    assert assign_models(ranked, hub, "central")[7] == "big"
    cfg = RunConfig.flat(
        protocol="sparse", topology="star", agents=N, models="big*1,small*999", strong_agents="peripheral"
    )
    assert [s.model for s in cfg.agent_specs()][7] == "small"


@pytest.mark.parametrize("make", [lambda: star(9, center=4), lambda: regular(10, 4 / 9), lambda: ring(7)])
@pytest.mark.parametrize("measure", ["degree", "betweenness", "closeness"])
def test_known_orbits_rank_as_networkx_does(make, measure):
    topo = make()
    assert centrality_order(topo, measure) == centrality_order(topo.base_graph, measure)


# ----------------------------------------------------------------------------- vectorised pure logic
def test_cortex_matrices_match_their_definitions():
    rng = np.random.default_rng(3)
    for _ in range(40):
        n = int(rng.integers(1, 8))
        c, r = rng.random(n), rng.choice([0.3, 0.6, 0.8], n)
        s, i_mat = rng.choice([0.0, 0.5, 2.0], n), rng.choice([0.0, 0.3, 1.0], (n, n))
        w = weight_matrix(c, r, i_mat, s)
        for a in range(n):
            for b in range(n):
                assert math.isnan(w[a, b]) if a == b else w[a, b] == trust(c[a], r[a], i_mat[a, b], s[a])
        mean = mean_incoming(w)
        for j in range(n if n > 1 else 0):
            col = [w[i, j] for i in range(n) if i != j]
            assert mean[j] == (math.inf if any(map(math.isinf, col)) else math.fsum(col) / (n - 1))
        keep = prune(w, mean)
        for i in range(n):
            for j in range(n):
                m = mean[j]
                want = i != j and (w[i, j] == m if math.isinf(m) else w[i, j] >= m - 1e-9 * max(abs(m), 1e-300))
                assert keep[i, j] == want
        assert by_weight(w) == [sorted((i for i in range(n) if i != j), key=lambda i: (-w[i, j], i)) for j in range(n)]


def test_s2mad_filters_match_their_definitions():
    rng = random.Random(4)
    for _ in range(200):
        n = rng.randint(1, 9)
        sim = [[rng.random() < 0.4 for _ in range(n)] for _ in range(n)]  # asymmetric on purpose
        cand = [rng.randrange(n) for _ in range(rng.randint(0, n))]
        kept: list[int] = []
        for c in cand:
            if not any(sim[k][c] or sim[c][k] for k in kept):
                kept.append(c)
        assert dedup(cand, sim) == dedup(cand, np.array(sim)) == kept
        own = rng.randrange(n)
        assert differing(own, cand, np.array(sim)) == [c for c in cand if c != own and not sim[own][c]]
    answers = [str(i % 7) if i % 11 else None for i in range(N)]
    sim = similar_by_answer(answers)
    assert sim.shape == (N, N) and sim.diagonal().all()
    assert sim[3, 10] and not sim[3, 4] and not sim[11, 22]  # None agrees with nothing else


def test_peer_block_is_each_peer_rendered_in_turn():
    texts = [(i, f"reply {i} with $dollars {{braces}} and \\0") for i in range(50)] + [("G", "a group")]
    for override in (None, {"all": {"peer": "\nAgent $agent said: ${text}\n"}}, {"all": {"peer": "$intro|$text $$"}}):
        prompts = PromptSet.for_task("numeric", override)
        assert prompts.peers_block(texts) == "".join(prompts.render("peer", text=t, agent=str(a)) for a, t in texts)


def test_simulated_word_count_is_str_split():
    rng = random.Random(5)
    alphabet = " \t\n\r\x0b\x0c\x1c\x1f\x85\u3000ab\\{}"
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert _words(text) == len(text.split())


@pytest.mark.parametrize("n", [3, 65])
def test_cortex_info_keeps_the_n_by_n_matrices_only_for_small_debates(n):
    """W and I are N x N per round: kept in protocol_info up to 64 agents, left out (and said so)
    above, where the graphs table still has every kept edge's weight."""
    import json

    from engine.protocols.cortex import MATRIX_INFO_MAX_AGENTS

    cfg = RunConfig.flat(protocol="cortex", agents=n, rounds=2, backend="simulated")
    ((row, log),) = run_local(
        cfg,
        arithmetic_questions(1, seed=4),
        SimulatedBackend(reply_tokens=8),
        similarity=lambda texts: np.full((len(texts), len(texts)), 0.5),
    )
    info = json.loads(row["protocol_info"])
    debate_round = info["rounds"][0]
    if n <= MATRIX_INFO_MAX_AGENTS:
        assert len(debate_round["W"]) == len(debate_round["I"]) == n and "matrices" not in info
    else:
        assert "W" not in debate_round and "I" not in debate_round and f"{n} agents > 64" in info["matrices"]
    assert len(debate_round["R"]) == n and debate_round["peers"]  # the per-agent vectors stay
    weighted = [g for g in log.graph_rows() if g["round"] == 1]
    assert weighted and all(g["weights"] is not None and len(g["weights"]) == len(g["srcs"]) for g in weighted)
