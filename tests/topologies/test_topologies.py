"""Tests for the `topologies` package (pure logic: networkx + numpy)."""

from __future__ import annotations

import itertools
from fractions import Fraction

import networkx as nx
import numpy as np
import pytest

from topologies import (
    ProbMAD,
    StaticTopology,
    Topology,
    TopologyError,
    centrality_order,
    from_edges,
    fully_connected,
    make_topology,
    parse_edges,
    regular,
    regular_degree,
    ring,
    star,
)


def undirected_edges(topo: Topology) -> set[frozenset]:
    """Edge set recovered from peers(): {i, j} when i reads j (must be mutual)."""
    out = set()
    for i, ps in topo.peers(1).items():
        for j in ps:
            out.add(frozenset((i, j)))
    return out


def check_peers_wellformed(topo: Topology, peers: dict[int, list[int]]) -> None:
    assert set(peers) == set(range(topo.n))
    for i, ps in peers.items():
        assert ps == sorted(ps)
        assert len(set(ps)) == len(ps)
        assert i not in ps
        assert all(0 <= j < topo.n for j in ps)
        assert all(type(j) is int for j in ps)


# ---------------------------------------------------------------------------
# the paper's N = 6 regular graphs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("density,k", [(1.0, 5), (4 / 5, 4), (3 / 5, 3), (2 / 5, 2)])
def test_paper_six_agent_regular_graphs(density, k):
    topo = regular(6, density)
    assert isinstance(topo, StaticTopology)
    assert topo.n == 6 and topo.directed is False
    assert regular_degree(6, density) == k
    assert topo.degrees() == {i: k for i in range(6)}
    assert set(topo.degrees().values()) == {round(density * 5)}
    edges = undirected_edges(topo)
    assert len(edges) == round(density * 15) == 3 * k
    assert topo.density == pytest.approx(density, abs=1e-12)
    # 2|E| / (N(N-1))
    assert 2 * len(edges) / (6 * 5) == pytest.approx(density)
    assert nx.is_connected(topo.base_graph)
    assert topo.is_connected()
    check_peers_wellformed(topo, topo.peers(1))
    # reading is mutual in undirected graphs
    p = topo.peers(2)
    assert all(i in p[j] for i in p for j in p[i])


def test_regular_accepts_float_noise_and_fractions():
    assert regular(6, 0.4).edges() == regular(6, 2 / 5).edges()
    assert regular(6, Fraction(3, 5)).degrees()[0] == 3
    assert regular(6, 0.6000000001).degrees()[0] == 3  # within 1e-6 of k=3


def test_regular_six_three_is_k33():
    topo = regular(6, 3 / 5)
    assert nx.is_isomorphic(topo.base_graph, nx.complete_bipartite_graph(3, 3))
    assert nx.is_bipartite(topo.base_graph)
    assert topo.edges() == [(0, 1), (0, 3), (0, 5), (1, 2), (1, 4), (2, 3), (2, 5), (3, 4), (4, 5)]


def test_regular_six_four_is_octahedron():
    topo = regular(6, 4 / 5)
    assert nx.is_isomorphic(topo.base_graph, nx.complete_multipartite_graph(2, 2, 2))
    # the missing edges are exactly the matching {i, i+3}
    missing = {frozenset(e) for e in itertools.combinations(range(6), 2)} - undirected_edges(topo)
    assert missing == {frozenset((0, 3)), frozenset((1, 4)), frozenset((2, 5))}


def test_regular_is_deterministic():
    assert regular(8, 3 / 7).edges() == regular(8, 3 / 7).edges()
    assert regular(10, 4 / 9).peers(1) == regular(10, 4 / 9).peers(3, key=99)


@pytest.mark.parametrize("n", [3, 4, 5, 6, 7, 8, 10, 12])
def test_ring_equals_regular_two_over_n_minus_one(n):
    r = ring(n)
    g = regular(n, 2 / (n - 1))
    assert r.edges() == g.edges()
    assert r.peers(1) == g.peers(1)
    assert r.density == pytest.approx(2 / (n - 1))
    assert r.degrees() == {i: 2 for i in range(n)}
    assert r.peers(1)[0] == [1, n - 1]
    assert len(r.edges()) == n


def test_ring_small():
    assert ring(2).peers(1) == {0: [1], 1: [0]}
    assert ring(2).density == pytest.approx(1.0)
    assert ring(1).peers(1) == {0: []}
    assert ring(1).edges() == []


def test_regular_four_agents():
    # Appendix D: two configurations, D = 2/3 (the 4-cycle) and D = 1/3 (a matching)
    c4 = regular(4, 2 / 3)
    assert c4.degrees() == {0: 2, 1: 2, 2: 2, 3: 2}
    assert len(c4.edges()) == 4
    assert nx.is_isomorphic(c4.base_graph, nx.cycle_graph(4))
    m = regular(4, 1 / 3)
    assert m.degrees() == {0: 1, 1: 1, 2: 1, 3: 1}
    assert m.edges() == [(0, 2), (1, 3)]
    assert not m.is_connected()
    assert m.density == pytest.approx(1 / 3)
    assert regular(4, 1).edges() == fully_connected(4).edges()


@pytest.mark.parametrize("n", [8, 10])
def test_regular_larger(n):
    for k in range(0, n):
        topo = regular(n, k / (n - 1))  # n even: every k is possible
        assert topo.degrees() == {i: k for i in range(n)}
        assert len(topo.edges()) == n * k // 2
        assert topo.density == pytest.approx(k / (n - 1))
        if k >= 2:
            assert topo.is_connected()
    assert regular(n, 1.0).edges() == fully_connected(n).edges()


def test_regular_odd_n_even_degrees_only():
    for k in (2, 4):
        assert regular(5, k / 4).degrees() == {i: k for i in range(5)}
    for k in (1, 3):
        with pytest.raises(TopologyError):
            regular(5, k / 4)


def test_density_one_and_zero():
    full = regular(6, 1)
    assert full.edges() == fully_connected(6).edges()
    assert full.peers(1)[2] == [0, 1, 3, 4, 5]
    empty = regular(6, 0)
    assert empty.peers(1) == {i: [] for i in range(6)}
    assert empty.density == 0.0
    assert make_topology("regular", 6, density=0).peers(2) == {i: [] for i in range(6)}
    assert make_topology("regular", 6, density=1.0).edges() == fully_connected(6).edges()


def test_fully_connected():
    t = fully_connected(5)
    assert t.density == 1.0
    assert t.degrees() == {i: 4 for i in range(5)}
    assert len(t.edges()) == 10
    assert fully_connected(1).peers(1) == {0: []}


# ---------------------------------------------------------------------------
# impossible densities and other argument errors
# ---------------------------------------------------------------------------


def test_impossible_density_odd_product():
    with pytest.raises(TopologyError) as ei:
        regular(5, 0.25)
    msg = str(ei.value)
    assert "--density 0.25" in msg and "--agents 5" in msg
    assert "no regular graph has that density" in msg
    assert "0.5 (k=2)" in msg and "1 (k=4)" in msg
    assert "k=1)" not in msg and "k=3)" not in msg


def test_impossible_density_non_integer_degree():
    with pytest.raises(TopologyError) as ei:
        regular(6, 0.3)
    msg = str(ei.value)
    assert "--density 0.3 with --agents 6" in msg
    assert ("densities possible for 6 agents: 0.2 (k=1), 0.4 (k=2), 0.6 (k=3), 0.8 (k=4), 1 (k=5)") in msg


def test_exact_message_format_example():
    with pytest.raises(TopologyError) as ei:
        regular(6, 0.5)
    assert str(ei.value).startswith(
        "--density 0.5 with --agents 6: no regular graph has that density; "
        "densities possible for 6 agents: 0.2 (k=1), 0.4 (k=2), 0.6 (k=3), 0.8 (k=4), 1 (k=5)"
    )


@pytest.mark.parametrize(
    "n, density, rule, nearest",
    [
        (1000, 0.5, "k/999 for any whole number k of peers from 1 to 999", "499/999 (k=499), 500/999 (k=500)"),
        (1001, 0.301, "k/1000 for k an even number of peers from 2 to 1000", "0.3 (k=300), 0.302 (k=302)"),
    ],
)
def test_many_agents_get_a_short_message_with_the_nearest_densities(n, density, rule, nearest):
    with pytest.raises(TopologyError) as ei:
        regular(n, density)
    msg = str(ei.value)
    assert f"densities possible for {n} agents: {rule}; nearest: {nearest} (" in msg
    assert len(msg) < 400 and "\n" not in msg
    for printed in nearest.split(", "):  # what the message prints is accepted as it is printed
        d, k = printed.split(" (k=")
        assert regular_degree(n, float(Fraction(d))) == int(k.rstrip(")"))


def test_topology_error_is_value_error():
    assert issubclass(TopologyError, ValueError)
    with pytest.raises(ValueError):
        regular(7, 0.1)


@pytest.mark.parametrize("bad", [-0.1, 1.2, float("nan"), "abc", None])
def test_density_out_of_range(bad):
    with pytest.raises(TopologyError) as ei:
        regular(6, bad)
    assert "--density" in str(ei.value) and "--agents 6" in str(ei.value)


@pytest.mark.parametrize("n", [0, -3])
def test_too_few_agents(n):
    for build in (
        fully_connected,
        ring,
        star,
        lambda m: regular(m, 1.0),
        lambda m: ProbMAD(m, 0.5),
        lambda m: from_edges(m, []),
    ):
        with pytest.raises(TopologyError) as ei:
            build(n)
        assert f"--agents {n}" in str(ei.value)
    with pytest.raises(TopologyError):
        make_topology("full", n)


def test_non_integer_agents():
    with pytest.raises(TopologyError):
        fully_connected(2.5)
    with pytest.raises(TopologyError):
        ring(True)


# ---------------------------------------------------------------------------
# star
# ---------------------------------------------------------------------------


def test_star_degrees():
    t = star(6)
    assert t.degrees() == {0: 5, 1: 1, 2: 1, 3: 1, 4: 1, 5: 1}
    assert t.peers(1)[0] == [1, 2, 3, 4, 5]
    assert t.peers(1)[4] == [0]
    assert t.density == pytest.approx(2 * 5 / 30)
    t3 = star(5, center=3)
    assert t3.degrees() == {0: 1, 1: 1, 2: 1, 3: 4, 4: 1}
    assert t3.peers(1)[3] == [0, 1, 2, 4]
    assert star(1).peers(1) == {0: []}


@pytest.mark.parametrize("center", [6, -1, 1.5])
def test_star_center_out_of_range(center):
    with pytest.raises(TopologyError) as ei:
        star(6, center)
    assert "--center" in str(ei.value) and "--agents 6" in str(ei.value)


# ---------------------------------------------------------------------------
# edge lists
# ---------------------------------------------------------------------------


def test_parse_edges():
    assert parse_edges("0-1,1-2,2-0") == [(0, 1), (1, 2), (2, 0)]
    assert parse_edges("0->1") == [(0, 1)]
    assert parse_edges(" 0 - 1 ; 3-4  5-6 ") == [(0, 1), (3, 4), (5, 6)]
    assert parse_edges("10->2, 2 -> 10") == [(10, 2), (2, 10)]
    assert parse_edges("") == []


@pytest.mark.parametrize("spec", ["0-1,a-2", "0-1-2", "0=1", "0-", "-1-2", "0-1,1->2", "0<-1"])
def test_parse_edges_errors(spec):
    with pytest.raises(TopologyError) as ei:
        parse_edges(spec)
    assert repr(spec) in str(ei.value)


def test_from_edges_undirected_string():
    t = from_edges(4, "0-1,1-2,2-0")
    assert t.directed is False
    assert t.peers(1) == {0: [1, 2], 1: [0, 2], 2: [0, 1], 3: []}
    assert t.density == pytest.approx(2 * 3 / 12)
    assert t.degrees() == {0: 2, 1: 2, 2: 2, 3: 0}


def test_from_edges_pairs_and_duplicates():
    t = from_edges(3, [(0, 1), (1, 0), (0, 1), (1, 2)])
    assert t.edges() == [(0, 1), (1, 2)]
    assert t.density == pytest.approx(2 * 2 / 6)
    t2 = from_edges(3, [np.array([0, 2])])
    assert t2.edges() == [(0, 2)]


def test_from_edges_directed():
    t = from_edges(3, "0->1,1->2,0->1")
    assert t.directed is True
    # u->v means v reads u
    assert t.peers(1) == {0: [], 1: [0], 2: [1]}
    assert t.density == pytest.approx(2 / 6)
    assert sorted(t.graph(1).edges()) == [(0, 1), (1, 2)]
    t2 = from_edges(3, [(2, 0)], directed=True)
    assert t2.peers(1) == {0: [2], 1: [], 2: []}
    assert t2.density == pytest.approx(1 / 6)


def test_from_edges_errors():
    with pytest.raises(TopologyError) as ei:
        from_edges(6, "0-1,2-2")
    assert "2-2" in str(ei.value) and "self-loop" in str(ei.value)
    with pytest.raises(TopologyError) as ei:
        from_edges(6, [(0, 6)])
    assert "0-6" in str(ei.value) and "--agents 6" in str(ei.value)
    with pytest.raises(TopologyError) as ei:
        from_edges(3, "0->1,4->0")
    assert "4->0" in str(ei.value)
    with pytest.raises(TopologyError):
        from_edges(3, [(0, 1, 2)])
    with pytest.raises(TopologyError):
        from_edges(3, [(-1, 1)])
    with pytest.raises(TopologyError):
        from_edges(3, None)


def test_static_topology_from_graph():
    t = StaticTopology(nx.path_graph(4), name="path")
    assert t.name == "path"
    assert t.peers(1) == {0: [1], 1: [0, 2], 2: [1, 3], 3: [2]}
    with pytest.raises(TopologyError):
        StaticTopology(nx.relabel_nodes(nx.path_graph(3), {0: "a"}))
    g = nx.Graph([(0, 1)])
    g.add_edge(1, 1)
    with pytest.raises(TopologyError):
        StaticTopology(g)
    # the topology does not alias the caller's graph
    h = nx.path_graph(3)
    t = StaticTopology(h)
    h.add_edge(0, 2)
    assert t.edges() == [(0, 1), (1, 2)]


# ---------------------------------------------------------------------------
# round semantics, graph() vs peers()
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "topo",
    [
        fully_connected(5),
        regular(6, 0.6),
        ring(7),
        star(4, 2),
        from_edges(4, "0->1,2->1,3->0"),
        ProbMAD(7, 0.5, seed=11),
    ],
    ids=lambda t: t.name,
)
def test_round_zero_and_graph_matches_peers(topo):
    assert topo.peers(0) == {i: [] for i in range(topo.n)}
    assert topo.peers(0, key=5) == {i: [] for i in range(topo.n)}
    assert topo.graph(0).number_of_edges() == 0
    for rnd, key in [(1, 0), (2, 0), (3, 17)]:
        peers = topo.peers(rnd, key)
        check_peers_wellformed(topo, peers)
        g = topo.graph(rnd, key)
        assert isinstance(g, nx.DiGraph)
        assert sorted(g.nodes()) == list(range(topo.n))
        expected = sorted((src, dst) for dst, srcs in peers.items() for src in srcs)
        assert sorted(g.edges()) == expected
        for dst in range(topo.n):
            assert sorted(g.predecessors(dst)) == peers[dst]
        assert topo.degrees(rnd, key) == {i: len(p) for i, p in peers.items()}
    with pytest.raises(TopologyError):
        topo.peers(-1)


def test_static_ignores_key_and_round():
    t = regular(6, 0.4)
    assert t.peers(1, key=0) == t.peers(1, key=12345) == t.peers(7, key=-3)


def test_undirected_graph_has_both_directions():
    g = ring(5).graph(1)
    assert g.number_of_edges() == 10
    assert g.has_edge(0, 1) and g.has_edge(1, 0)


def test_peers_returns_fresh_lists():
    t = ring(4)
    p = t.peers(1)
    p[0].append(99)
    assert t.peers(1)[0] == [1, 3]


# ---------------------------------------------------------------------------
# ProbMAD
# ---------------------------------------------------------------------------


def test_probmad_reproducible_and_order_independent():
    a = ProbMAD(6, 0.4, seed=7)
    b = ProbMAD(6, 0.4, seed=7)
    first = a.peers(3, key=42)
    # interleave other calls; result for (seed, key, round) must not change
    b.peers(1, key=1)
    b.peers(5, key=42)
    assert b.peers(3, key=42) == first
    assert a.peers(3, key=42) == first
    assert a.graph(3, key=42).edges() == b.graph(3, key=42).edges()


def test_probmad_differs_across_rounds_keys_seeds():
    t = ProbMAD(8, 0.5, seed=1)
    rounds = [t.peers(r, key=0) for r in range(1, 6)]
    assert len({repr(p) for p in rounds}) == 5
    keys = [t.peers(1, key=k) for k in range(5)]
    assert len({repr(p) for p in keys}) == 5
    assert ProbMAD(8, 0.5, seed=2).peers(1, 0) != t.peers(1, 0)


def test_probmad_never_includes_self_and_is_directed():
    t = ProbMAD(6, 0.9, seed=3)
    assert t.directed is True
    asym = 0
    for r in range(1, 40):
        p = t.peers(r, key=r * 7)
        check_peers_wellformed(t, p)
        asym += sum(1 for i in p for j in p[i] if i not in p[j])
    assert asym > 0  # draws for (i, j) and (j, i) are independent


@pytest.mark.parametrize("p", [0.4, 0.8])
def test_probmad_empirical_rate(p):
    n = 6
    t = ProbMAD(n, p, seed=123)
    seen = 0
    total = 0
    for key in range(20):
        for r in range(1, 51):
            for ps in t.peers(r, key).values():
                seen += len(ps)
                total += n - 1
    assert abs(seen / total - p) < 0.03
    assert t.density == p
    assert t.expected_degree == pytest.approx(p * (n - 1))


def test_probmad_pair_rate_is_uniform():
    # every ordered pair (i, j) is read with probability ~p
    t = ProbMAD(4, 0.4, seed=5)
    counts = np.zeros((4, 4))
    trials = 2000
    for r in range(1, trials + 1):
        counts += t.reads_matrix(r, key=9)
    rates = counts / trials
    assert np.all(np.diag(rates) == 0)
    off = rates[~np.eye(4, dtype=bool)]
    assert np.all(np.abs(off - 0.4) < 0.05)


def test_probmad_extremes():
    zero = ProbMAD(5, 0.0, seed=9)
    one = ProbMAD(5, 1.0, seed=9)
    for r in range(1, 10):
        assert zero.peers(r, key=r) == {i: [] for i in range(5)}
        assert one.peers(r, key=r) == {i: [j for j in range(5) if j != i] for i in range(5)}
    assert ProbMAD(1, 0.7).peers(4) == {0: []}


def test_probmad_nested_in_p():
    lo, hi = ProbMAD(7, 0.3, seed=4), ProbMAD(7, 0.7, seed=4)
    for r in range(1, 10):
        a, b = lo.peers(r, key=2), hi.peers(r, key=2)
        assert all(set(a[i]) <= set(b[i]) for i in range(7))


def test_probmad_arguments():
    for bad in (-0.01, 1.01, float("nan")):
        with pytest.raises(TopologyError):
            ProbMAD(6, bad)
    t = ProbMAD(6, 0.5, seed=-4)
    assert t.peers(1, key=-1) == ProbMAD(6, 0.5, seed=-4).peers(1, key=-1)
    assert t.peers(1, key=-1) != t.peers(1, key=1) or t.peers(2, key=-1) != t.peers(2, key=1)
    big = ProbMAD(6, 0.5, seed=2**70)
    check_peers_wellformed(big, big.peers(1, key=2**64 + 3))
    with pytest.raises(TopologyError):
        t.peers(1, key="q1")


# ---------------------------------------------------------------------------
# make_topology
# ---------------------------------------------------------------------------


def test_make_topology_kinds():
    assert make_topology("full", 5).edges() == fully_connected(5).edges()
    assert make_topology("Regular", 6, density=0.6).edges() == regular(6, 0.6).edges()
    assert make_topology("ring", 6).edges() == ring(6).edges()
    assert make_topology("star", 6, center=2).degrees()[2] == 5
    assert make_topology("edges", 4, edges="0-1,2-3").edges() == [(0, 1), (2, 3)]
    assert make_topology("edges", 3, edges="0->2").peers(1) == {0: [], 1: [], 2: [0]}
    assert make_topology("edges", 3, edges=[(0, 2)]).peers(1) == {0: [2], 1: [], 2: [0]}
    pm = make_topology("probmad", 6, density=0.4, seed=3)
    assert isinstance(pm, ProbMAD) and pm.density == 0.4
    assert pm.peers(2, key=8) == ProbMAD(6, 0.4, seed=3).peers(2, key=8)
    # consistent density is accepted for fixed-density kinds
    assert make_topology("ring", 6, density=0.4).density == pytest.approx(0.4)
    assert make_topology("full", 6, density=1).density == 1.0


def test_make_topology_errors():
    with pytest.raises(TopologyError) as ei:
        make_topology("regular", 6)
    assert "--density" in str(ei.value) and "0.4 (k=2)" in str(ei.value)
    with pytest.raises(TopologyError) as ei:
        make_topology("probmad", 6)
    assert "--density" in str(ei.value)
    with pytest.raises(TopologyError) as ei:
        make_topology("edges", 6)
    assert "--edges" in str(ei.value)
    with pytest.raises(TopologyError) as ei:
        make_topology("hypercube", 6)
    assert "hypercube" in str(ei.value) and "regular" in str(ei.value)
    with pytest.raises(TopologyError) as ei:
        make_topology("ring", 6, density=0.8)
    assert "--density 0.8" in str(ei.value) and "0.4" in str(ei.value)
    with pytest.raises(TopologyError):
        make_topology("ring", 6, edges="0-1")
    with pytest.raises(TopologyError) as ei:
        make_topology("regular", 5, density=0.25)
    assert "--density 0.25 with --agents 5" in str(ei.value)
    with pytest.raises(TopologyError):
        make_topology("star", 4, center=4)
    with pytest.raises(TopologyError):
        make_topology("probmad", 4, density=2)


# ---------------------------------------------------------------------------
# centrality
# ---------------------------------------------------------------------------


def test_centrality_star_centre_first():
    assert centrality_order(star(6))[0] == 0
    order = centrality_order(star(6, center=4))
    assert order == [4, 0, 1, 2, 3, 5]
    assert centrality_order(star(6, center=4), "betweenness")[0] == 4
    assert centrality_order(star(6, center=4), "closeness")[0] == 4


def test_centrality_tie_break_by_betweenness_then_index():
    # path 0-1-2-3-4: degrees 1,2,2,2,1; betweenness highest at 2, then 1 and 3
    assert centrality_order(from_edges(5, "0-1,1-2,2-3,3-4")) == [2, 1, 3, 0, 4]
    # all ties -> index order
    assert centrality_order(regular(6, 0.6)) == list(range(6))
    assert centrality_order(ProbMAD(5, 0.5)) == list(range(5))


def test_centrality_directed_counts_readers():
    # 3 is read by everybody (information source), 0 reads everybody
    t = from_edges(4, "3->0,3->1,3->2,1->0,2->0")
    assert centrality_order(t)[0] == 3
    with pytest.raises(TopologyError):
        centrality_order(t, "pagerank-ish")


def test_centrality_accepts_graph():
    assert centrality_order(nx.star_graph(4)) == [0, 1, 2, 3, 4]


def test_describe():
    d = regular(6, 0.4).describe()
    assert d["n"] == 6 and d["density"] == pytest.approx(0.4) and d["directed"] is False
    assert d["edges"] == [[0, 1], [0, 5], [1, 2], [2, 3], [3, 4], [4, 5]]
    assert d["name"] == "regular(D=0.4,k=2)"
    pd = ProbMAD(6, 0.4, seed=2).describe()
    assert pd["p"] == 0.4 and pd["seed"] == 2


# ---------------------------------------------------------------------------
# densities as the flag takes them; snapping; --degree
# ---------------------------------------------------------------------------
def test_fmt_ratio_is_a_short_exact_decimal_or_a_fraction():
    from topologies import fmt_ratio

    assert [fmt_ratio(k, 5) for k in (0, 1, 2, 5)] == ["0", "0.2", "0.4", "1"]
    assert [fmt_ratio(1, 3), fmt_ratio(2, 6), fmt_ratio(500, 999)] == ["1/3", "1/3", "500/999"]
    assert fmt_ratio(3, 8) == "0.375"


@pytest.mark.parametrize("n", [*range(2, 40), 100, 999, 1000])
def test_every_density_an_error_offers_is_accepted(n):
    """The values a "no regular graph" error lists, read as --density reads them, build that graph."""
    import re

    from engine.options import parse_number
    from topologies import regular_degree

    offered = []
    for asked in (0.5, 0.45, 0.55, 0.3, 0.7):
        try:
            regular_degree(n, asked)
        except TopologyError as exc:
            offered += re.findall(r"([0-9./]+) \(k=(\d+)\)", str(exc))
    assert offered
    for text, k in offered:
        assert regular_degree(n, parse_number(text, "--density")) == int(k), (n, text)


def test_nearest_regular_degree_snaps_within_1e_3_only():
    from topologies import nearest_regular_degree

    assert nearest_regular_degree(4, 0.333) == 1 and nearest_regular_degree(4, 0.6672) == 2
    assert nearest_regular_degree(4, 0.34) is None and nearest_regular_degree(4, 0.5) is None
    assert nearest_regular_degree(5, 0.25) is None  # k = 1 is odd x 5: no graph to snap to
    assert nearest_regular_degree(1000, 0.5) == 499  # 499/999 and 500/999 tie: the lower
    assert nearest_regular_degree(1, 0.5) is None


def test_check_degree_names_the_flag_and_the_possible_degrees():
    from topologies import check_degree

    check_degree(6, 3)
    check_degree(6, 0)
    with pytest.raises(TopologyError, match=r"--degree 3 with --agents 5: .*15 is odd\); degrees possible: 0, 2, 4$"):
        check_degree(5, 3)
    with pytest.raises(TopologyError, match=r"--degree 7 with --agents 6: .*0 to 5 peers"):
        check_degree(6, 7)
    with pytest.raises(TopologyError, match=r"degrees possible: even numbers 2 to 1000$"):
        check_degree(1001, 3)
