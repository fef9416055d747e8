"""Static (round-independent) communication topologies.

In the sparse-topology paper (section 3.1) a topology is an undirected graph
``G = (V, E)``: an edge ``{i, j}`` means agent ``i`` reads agent ``j``'s
previous-round reply *and vice versa*.  Its density is

    D = 2|E| / (N (N - 1))

so the fully connected debate has ``D = 1`` and the neighbour-connected
(ring) debate has ``D = 2 / (N - 1)``.  For a ``k``-regular graph
``D = k / (N - 1)``.

:class:`StaticTopology` also accepts a directed graph (for user-given
``--edges 0->1,...`` lists); there an edge ``u -> v`` means *v reads u*
(information flows along the arrow) and the density is
``|E| / (N (N - 1))``.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from .base import Topology, TopologyError, check_n, check_unit_interval, fmt_num, fmt_ratio

if TYPE_CHECKING:  # networkx is imported where a graph is built (0.3 s of start-up)
    import networkx as nx

__all__ = [
    "StaticTopology",
    "fully_connected",
    "regular",
    "regular_degree",
    "nearest_regular_degree",
    "check_degree",
    "possible_regular_densities",
    "ring",
    "star",
    "from_edges",
    "parse_edges",
]

_TOL = 1e-6


class StaticTopology(Topology):
    """A topology that is the same in every debate round and for every question.

    Parameters
    ----------
    graph:
        An undirected :class:`networkx.Graph` (mutual reading; the paper's
        setting) or a :class:`networkx.DiGraph` whose edge ``u -> v`` means
        ``v`` reads ``u``.  Nodes must be exactly ``0 .. n-1`` (``n >= 1``);
        self-loops are rejected.  The graph is copied.
    name:
        Label for logs/records (default ``"static"``).

    The topology keeps each agent's sorted peer list; the networkx graph is
    made only when asked for (:attr:`base_graph`, centrality, connectivity),
    so the built-in constructors (:func:`fully_connected`, :func:`regular`,
    :func:`ring`, :func:`star`) build a 1,000-agent graph of any density
    from arrays, without 10^5-10^6 networkx edge insertions.
    """

    _g: nx.Graph | None  # the networkx graph, once made (None until then)

    def __init__(self, graph: nx.Graph, name: str | None = None):
        # function-level: importing networkx here keeps it off start-up
        import networkx as nx

        if not isinstance(graph, nx.Graph):
            raise TopologyError(f"StaticTopology needs a networkx graph, got {type(graph).__name__}")
        n = graph.number_of_nodes()
        if n < 1:
            raise TopologyError("--agents 0: need at least 1 agent (the graph has no nodes)")
        if set(graph.nodes()) != set(range(n)):
            bad = sorted((v for v in graph.nodes() if v not in set(range(n))), key=repr)
            raise TopologyError(f"graph nodes must be the agent ids 0..{n - 1}; unexpected node(s) {bad[:5]!r}")
        directed = graph.is_directed()
        g: nx.Graph = nx.DiGraph() if directed else nx.Graph()
        g.add_nodes_from(range(n))
        for u, v in graph.edges():
            if u == v:
                raise TopologyError(
                    f"edge {_fmt_edge(u, v, directed)} is a self-loop; an agent always "
                    "keeps its own previous answer, list only other agents"
                )
            g.add_edge(u, v)
        readers = [sorted(g.predecessors(i) if directed else g.neighbors(i)) for i in range(n)]
        self._init(readers, directed, name, g.number_of_edges())
        self._g = g

    def _init(
        self, readers: list[Any], directed: bool, name: str | None, n_edges: int, orbits: list[list[int]] | None = None
    ) -> None:
        self.n = len(readers)
        self.directed = directed
        self.name = name or "static"
        self._readers_of = [np.asarray(r, dtype=np.int64) for r in readers]  # ~8 bytes an edge, not a Python int
        self._n_edges = n_edges
        self._orbits = orbits
        self._g = None

    @classmethod
    def _from_readers(cls, readers: list[Any], name: str, orbits: list[list[int]] | None = None) -> StaticTopology:
        """An undirected topology from each agent's sorted peer list (symmetric, no self-loops:
        the constructors below guarantee it), with the graph's orbits when they are known."""
        topo = cls.__new__(cls)
        topo._init(readers, False, name, sum(map(len, readers)) // 2, orbits)
        return topo

    # -- Topology API ----------------------------------------------------------
    def _peers(self, round: int, key: int) -> dict[int, list[int]]:  # noqa: A002
        return {i: p.tolist() for i, p in enumerate(self._readers_of)}

    @property
    def density(self) -> float:
        """``2|E| / (N(N-1))`` (undirected) or ``|E| / (N(N-1))`` (directed);
        0.0 for a single agent."""
        n = self.n
        if n < 2:
            return 0.0
        e = self._n_edges
        return (e if self.directed else 2 * e) / (n * (n - 1))

    def degrees(self, round: int = 1, key: int = 0) -> dict[int, int]:  # noqa: A002
        """Number of peers each agent reads (the same in every round >= 1)."""
        return {i: len(p) for i, p in enumerate(self._readers_of)}

    def centrality_graph(self) -> nx.Graph:
        return self.base_graph

    def orbits(self) -> list[list[int]] | None:
        return None if self._orbits is None else [list(o) for o in self._orbits]

    # -- extras ----------------------------------------------------------------
    @property
    def base_graph(self) -> nx.Graph:
        """A copy of the underlying (undirected or directed) graph."""
        # function-level: importing networkx here keeps it off start-up
        import networkx as nx

        if self._g is None:
            g: nx.Graph = nx.DiGraph() if self.directed else nx.Graph()
            g.add_nodes_from(range(self.n))
            g.add_edges_from(self.edges())
            self._g = g
        return self._g.copy()

    def edges(self) -> list[tuple[int, int]]:
        """Sorted edge list; undirected edges are given as ``(min, max)``."""
        if self.directed:
            return sorted((src, dst) for dst, srcs in enumerate(self._readers_of) for src in srcs.tolist())
        return [(u, v) for u, peers in enumerate(self._readers_of) for v in peers[peers > u].tolist()]

    def is_connected(self) -> bool:
        """Connected (undirected) / weakly connected (directed)."""
        # function-level: importing networkx here keeps it off start-up
        import networkx as nx

        if self.directed:
            return nx.is_weakly_connected(self.base_graph)
        return nx.is_connected(self.base_graph)

    def is_regular(self) -> bool:
        return len(set(self.degrees().values())) <= 1

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d["edges"] = [list(e) for e in self.edges()]
        return d


# ---------------------------------------------------------------------------
# constructors
# ---------------------------------------------------------------------------


def fully_connected(n: int) -> StaticTopology:
    """Every agent reads every other agent (standard MAD, ``D = 1``)."""
    n = check_n(n)
    return _circulant(n, range(1, n // 2 + 1), "full")


def possible_regular_densities(n: int) -> list[tuple[int, float]]:
    """``(k, D)`` for every ``k >= 1`` such that a k-regular graph on ``n``
    nodes exists (``k <= n-1`` and ``n*k`` even), with ``D = k/(n-1)``.
    (``k = 0``, ``D = 0`` -- no communication -- is always possible too.)"""
    n = check_n(n)
    return [(k, k / (n - 1)) for k in range(1, n) if (n * k) % 2 == 0]


LISTED_DENSITIES = 10  # more possible densities than this: the message names the rule and the nearest ones


def _possible_text(n: int, asked: float | None = None) -> str:
    """The densities a regular graph on ``n`` agents can have, each as ``--density`` accepts it
    (``0.4``, ``1/3``; :func:`topologies.base.fmt_ratio`): all of them when there are few, else
    the rule and the ones nearest ``asked`` (one short line at 1,000 agents)."""
    opts = possible_regular_densities(n)
    if not opts:
        return f"densities possible for {n} agent{'s' if n != 1 else ''}: only 0 (no communication)"
    if len(opts) <= LISTED_DENSITIES or asked is None:
        return f"densities possible for {n} agents: " + ", ".join(f"{fmt_ratio(k, n - 1)} (k={k})" for k, _ in opts)
    rule = "k an even number" if n % 2 else "any whole number k"
    nearest = sorted(sorted(opts, key=lambda kd: abs(kd[1] - asked))[:2])
    return (
        f"densities possible for {n} agents: k/{n - 1} for {rule} of peers from {opts[0][0]} to {opts[-1][0]}; "
        f"nearest: " + ", ".join(f"{fmt_ratio(k, n - 1)} (k={k})" for k, _ in nearest)
    )


SNAP_TOL = 1e-3  # a density this close to a possible one is taken as that one (with a note)


def nearest_regular_degree(n: int, density: float, tol: float = SNAP_TOL) -> int | None:
    """The degree ``k`` of the regular graph on ``n`` agents whose density ``k/(n-1)`` is nearest
    ``density``, when it is within ``tol`` (the lower ``k`` on a tie); None when none is, or for
    one agent. Used to snap a density given in decimals (``0.333`` for 4 agents -> ``k = 1``)."""
    if n < 2:
        return None
    ks = [k for k in range(n) if (n * k) % 2 == 0]
    best = min(ks, key=lambda k: (abs(density - k / (n - 1)), k))
    return best if abs(density - best / (n - 1)) <= tol else None


def check_degree(n: int, k: int) -> None:
    """Raise :class:`TopologyError` naming ``--degree`` unless a ``k``-regular graph on ``n``
    agents exists (``0 <= k <= n-1`` and ``n*k`` even)."""
    if n > 1 and 0 <= k <= n - 1 and (n * k) % 2 == 0:
        return
    ks = [kk for kk, _ in possible_regular_densities(n)]
    if len(ks) > LISTED_DENSITIES:
        possible = f"{'even numbers' if n % 2 else 'whole numbers'} {ks[0]} to {ks[-1]}"
    else:
        possible = ", ".join(map(str, [0, *ks]))
    if k < 0 or k > n - 1:
        why = f"an agent has 0 to {n - 1} peers"
    else:
        why = f"a {k}-regular graph needs agents x k even and {n} x {k} = {n * k} is odd"
    raise TopologyError(f"--degree {k} with --agents {n}: no regular graph ({why}); degrees possible: {possible}")


def regular_degree(n: int, density: float) -> int:
    """Degree ``k = D (N-1)`` of the regular graph with ``n`` agents and the
    given density, after checking that such a graph exists.

    ``D (N-1)`` must be an integer within 1e-6 (so ``0.4`` and ``2/5`` are both
    fine for 6 agents), or ``D`` must equal ``k/(N-1)`` to the 6 significant digits the
    error messages print (``0.500501`` for 500 of 999 peers), ``0 <= k <= N-1``, and ``N*k`` must be even (a
    k-regular graph on N nodes exists iff ``k < N`` and ``N*k`` is even).
    Otherwise :class:`TopologyError`, e.g.::

        --density 0.5 with --agents 6: no regular graph has that density;
        densities possible for 6 agents: 0.2 (k=1), 0.4 (k=2), 0.6 (k=3),
        0.8 (k=4), 1 (k=5) (0.5 x 5 = 2.5 is not a whole number of peers)

    With a single agent every density gives ``k = 0``.
    """
    n = check_n(n)
    d = check_unit_interval(density, "--density", n)
    if n == 1:
        return 0
    kf = d * (n - 1)
    k = int(round(kf))
    head = f"--density {fmt_num(d)} with --agents {n}: no regular graph has that density; "
    # a density as the engine prints it (6 significant digits: 0.500501 for 500/999) is accepted too
    if abs(kf - k) > _TOL and fmt_num(d) != fmt_num(k / (n - 1)):
        raise TopologyError(
            head + _possible_text(n, d) + f" ({fmt_num(d)} x {n - 1} = {kf:.6g} is not a whole number of peers)"
        )
    if (n * k) % 2:
        raise TopologyError(
            head + _possible_text(n, d) + f" (k = {fmt_num(d)} x {n - 1} = {k}, but a {k}-regular graph needs "
            f"agents x k even and {n} x {k} = {n * k} is odd)"
        )
    return k


def regular(n: int, density: float) -> StaticTopology:
    """The k-regular topology with ``k = density * (n - 1)`` peers per agent.

    Construction (deterministic): the circulant graph
    ``networkx.circulant_graph(n, offsets)`` -- agent ``i`` is linked to
    ``i +- s (mod n)`` for every offset ``s`` -- with offsets
    ``1 .. floor(k/2)`` plus offset ``n/2`` when ``k`` is odd (``n`` is then
    even, since ``n*k`` must be even).  Consequences:

    * ``k = 0``: isolated agents (density 0; every agent only self-checks);
    * ``k = 1``: the perfect matching ``{i, i + n/2}``;
    * ``k = 2``: the neighbour ring (``ring(n)`` for ``n >= 3``);
    * ``k = n-1``: the complete graph (density 1 == ``fully_connected(n)``).

    The paper's figure 2 topologies for N = 6 are regular graphs with degrees
    5, 4, 3, 2 (D = 1, 4/5, 3/5, 2/5).  The paper's analysis is about regular,
    permutation-invariant graphs with homogeneous agents, so for N = 6 any
    k-regular graph with the same k is what it calls for; this function gives,
    for N = 6: k=5 -> K6, k=4 -> the octahedron K_{2,2,2} (K6 minus the
    matching ``{i, i+3}``), k=3 -> offsets {1, 3}, i.e. the 6-cycle plus its
    three long diagonals, which is the complete bipartite graph K_{3,3}
    (even vs. odd agents) -- *not* the triangular prism, the other 3-regular
    graph on 6 nodes -- and k=2 -> the 6-cycle.  Every circulant graph is
    vertex-transitive, so all agents are structurally equivalent.

    Raises :class:`TopologyError` (see :func:`regular_degree`) when no regular
    graph of that density exists.
    """
    n = check_n(n)
    k = regular_degree(n, density)
    offsets = list(range(1, k // 2 + 1))
    if k % 2:
        offsets.append(n // 2)
    d = k / (n - 1) if n > 1 else 0.0
    return _circulant(n, offsets, f"regular(D={fmt_num(d)},k={k})")


def _circulant(n: int, offsets: Iterable[int], name: str) -> StaticTopology:
    """``networkx.circulant_graph(n, offsets)`` (agent ``i`` linked to ``i +- s (mod n)``) as a
    topology, built with numpy. A circulant graph is vertex-transitive: one orbit."""
    offs = np.asarray(sorted(set(offsets)), dtype=np.int64)
    if not len(offs) or n < 2:
        return StaticTopology._from_readers([[] for _ in range(n)], name, [list(range(n))])
    shifts = np.unique(np.concatenate([offs % n, (-offs) % n]))
    shifts = shifts[shifts != 0]
    readers = np.sort((np.arange(n)[:, None] + shifts[None, :]) % n, axis=1)
    return StaticTopology._from_readers(list(readers), name, [list(range(n))])


def ring(n: int) -> StaticTopology:
    """Neighbour-connected MAD: agent ``i`` reads ``i-1`` and ``i+1`` (mod n).

    ``D = 2/(n-1)`` for ``n >= 3`` (identical to ``regular(n, 2/(n-1))``);
    ``n = 2`` is the single edge 0-1 and ``n = 1`` has no edges.
    """
    n = check_n(n)
    return _circulant(n, [1], "ring")  # n=2: one edge, n=1: lone node


def star(n: int, center: int = 0) -> StaticTopology:
    """``center`` reads (and is read by) everybody; the others read only the
    centre.  Centre degree ``n-1``, leaf degree 1."""
    n = check_n(n)
    try:
        if isinstance(center, bool):
            raise TypeError
        c = operator.index(center)
    except TypeError:
        raise TopologyError(
            f"--center {center!r} with --agents {n}: the centre must be an agent id 0..{n - 1}"
        ) from None
    if not 0 <= c < n:
        raise TopologyError(f"--center {c} with --agents {n}: the centre must be an agent id 0..{n - 1}")
    leaves = [j for j in range(n) if j != c]
    readers = [[c] for _ in range(n)]
    readers[c] = leaves
    orbits = [[c], leaves] if leaves else [[c]]
    return StaticTopology._from_readers(readers, f"star(center={c})", orbits)


# ---------------------------------------------------------------------------
# user-given edge lists
# ---------------------------------------------------------------------------

_EDGE_RE = re.compile(r"^(\d+)(->|-)(\d+)$")


def _fmt_edge(u: Any, v: Any, directed: bool) -> str:
    return f"{u}->{v}" if directed else f"{u}-{v}"


def _parse_edge_spec(spec: str) -> tuple[list[tuple[int, int]], bool]:
    """Parse ``"0-1,1-2"`` / ``"0->1; 1->2"``; return (edges, uses_arrows)."""
    if not isinstance(spec, str):
        raise TopologyError(f"--edges {spec!r}: expected a string like '0-1,1-2,2-0' or '0->1'")
    # allow blanks around the operators ("0 - 1", "0 -> 1")
    text = re.sub(r"\s*(->|-)\s*", r"\1", spec.strip())
    tokens = [t for t in re.split(r"[,;\s]+", text) if t]
    edges: list[tuple[int, int]] = []
    kinds: set[str] = set()
    for tok in tokens:
        m = _EDGE_RE.match(tok)
        if not m:
            raise TopologyError(
                f"--edges {spec!r}: cannot parse {tok!r}; expected agent-id pairs like "
                "0-1 (both read each other) or 0->1 (1 reads 0), separated by commas"
            )
        kinds.add(m.group(2))
        edges.append((int(m.group(1)), int(m.group(3))))
    if len(kinds) > 1:
        raise TopologyError(
            f"--edges {spec!r}: mixes undirected '-' and directed '->' edges; use one kind "
            "(write a mutual link as 0->1,1->0 in a directed list)"
        )
    return edges, kinds == {"->"}


def parse_edges(spec: str) -> list[tuple[int, int]]:
    """Parse an edge list string into ``[(u, v), ...]`` (order kept, duplicates kept).

    Accepted: ``"0-1,1-2,2-0"`` (undirected) or ``"0->1,1->2"`` (directed:
    ``u->v`` means v reads u); commas, semicolons or blanks separate edges,
    blanks around ``-``/``->`` are allowed; the empty string is no edges.
    Mixing ``-`` and ``->`` is an error.  Range and self-loop checks happen in
    :func:`from_edges`, which knows the agent count.
    """
    return _parse_edge_spec(spec)[0]


def _coerce_pair(item: Any) -> tuple[int, int]:
    try:
        u, v = item
        if isinstance(u, bool) or isinstance(v, bool):
            raise TypeError
        return operator.index(u), operator.index(v)
    except (TypeError, ValueError):
        raise TopologyError(f"--edges: cannot read edge {item!r}; expected a pair of agent ids like (0, 1)") from None


def from_edges(n: int, edges: Iterable[tuple[int, int]] | str, directed: bool = False) -> StaticTopology:
    """Topology from an explicit edge list.

    ``edges`` is an iterable of ``(u, v)`` pairs or a string accepted by
    :func:`parse_edges`.  Undirected (default): ``u`` and ``v`` read each
    other.  Directed (``directed=True``, or a string written with ``->``):
    ``v`` reads ``u``.  Agent ids must be in ``0 .. n-1``; self-loops are an
    error naming the edge; duplicate edges (including ``1-0`` after ``0-1`` in
    an undirected list) are ignored.  Agents without edges self-check.
    """
    n = check_n(n)
    if edges is None:
        raise TopologyError("--topology edges needs --edges, e.g. --edges 0-1,1-2,2-0")
    if isinstance(edges, str):
        pairs, arrows = _parse_edge_spec(edges)
        directed = bool(directed) or arrows
    else:
        try:
            items = list(edges)
        except TypeError:
            raise TopologyError(f"--edges {edges!r}: expected pairs of agent ids or a string like '0-1,1-2'") from None
        pairs = [_coerce_pair(it) for it in items]
        directed = bool(directed)
    # function-level: importing networkx here keeps it off start-up
    import networkx as nx

    g: nx.Graph = nx.DiGraph() if directed else nx.Graph()
    g.add_nodes_from(range(n))
    for u, v in pairs:
        for node in (u, v):
            if not 0 <= node < n:
                raise TopologyError(
                    f"--edges: edge {_fmt_edge(u, v, directed)} uses agent {node}, but "
                    f"--agents {n} gives agents 0..{n - 1}"
                )
        if u == v:
            raise TopologyError(
                f"--edges: edge {_fmt_edge(u, v, directed)} is a self-loop; an agent always "
                "keeps its own previous answer, list only links between different agents"
            )
        g.add_edge(u, v)
    return StaticTopology(g, name="edges-directed" if directed else "edges")
