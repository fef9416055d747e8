"""Building topologies from CLI-style arguments and ranking agents by centrality."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where centralities are computed (start-up time)
    import networkx as nx

from .base import Topology, TopologyError, check_n, fmt_num
from .probmad import ProbMAD
from .static import (
    _possible_text,
    from_edges,
    fully_connected,
    regular,
    ring,
    star,
)

__all__ = ["KINDS", "make_topology", "centrality_order", "centrality_classes", "CENTRALITY_MEASURES"]

KINDS = ("full", "regular", "ring", "star", "edges", "probmad")

_ALIASES = {
    "full": "full",
    "fully-connected": "full",
    "complete": "full",
    "regular": "regular",
    "ring": "ring",
    "neighbor": "ring",
    "neighbour": "ring",
    "star": "star",
    "edges": "edges",
    "custom": "edges",
    "probmad": "probmad",
    "prob": "probmad",
}

_TOL = 1e-6


def _norm_kind(kind: Any) -> str:
    if not isinstance(kind, str):
        raise TopologyError(f"--topology {kind!r}: choose one of {', '.join(KINDS)}")
    key = kind.strip().lower().replace("_", "-")
    if key not in _ALIASES:
        raise TopologyError(f"--topology {kind!r}: unknown topology; choose one of {', '.join(KINDS)}")
    return _ALIASES[key]


def make_topology(
    kind: str,
    n: int,
    density: float | None = None,
    edges: Iterable[tuple[int, int]] | str | None = None,
    center: int = 0,
    seed: int = 0,
) -> Topology:
    """Build a topology from command-line style arguments.

    ``kind`` (``--topology``), case-insensitive:

    ``full``     every agent reads all others (aliases ``fully_connected``, ``complete``)
    ``regular``  k-regular circulant graph with ``k = density (n-1)``; needs ``density``
    ``ring``     neighbour-connected (aliases ``neighbor``, ``neighbour``)
    ``star``     hub ``center`` linked to everybody
    ``edges``    explicit ``edges`` (pairs or ``"0-1,1-2"`` / ``"0->1"``; alias ``custom``)
    ``probmad``  random reading with probability ``density`` per pair per round,
                 seeded by ``seed``; needs ``density`` (alias ``prob``)

    ``density`` given for ``full``/``ring``/``star``/``edges`` is only a
    consistency check: it must equal the resulting density (within 1e-6),
    else :class:`TopologyError`.  ``edges`` given for any kind but ``edges``
    is an error.  All problems raise :class:`TopologyError` naming the flags.
    """
    k = _norm_kind(kind)
    n = check_n(n)
    if edges is not None and k != "edges":
        raise TopologyError(f"--edges is only used with --topology edges (got --topology {k})")

    if k == "regular":
        if density is None:
            raise TopologyError(f"--topology regular with --agents {n} needs --density; {_possible_text(n)}")
        return regular(n, density)
    if k == "probmad":
        if density is None:
            raise TopologyError(
                "--topology probmad needs --density: the probability (0..1) that an agent "
                "reads each other agent's previous answer in a round"
            )
        return ProbMAD(n, density, seed=seed)

    if k == "full":
        topo = fully_connected(n)
    elif k == "ring":
        topo = ring(n)
    elif k == "star":
        topo = star(n, center)
    else:  # edges
        if edges is None:
            raise TopologyError("--topology edges needs --edges, e.g. --edges 0-1,1-2,2-0 (mutual) or 0->1 (1 reads 0)")
        topo = from_edges(n, edges)

    if density is not None:
        try:
            d = float(density)
        except (TypeError, ValueError):
            raise TopologyError(f"--density {density!r}: must be a number between 0 and 1") from None
        if not abs(d - topo.density) <= _TOL:
            raise TopologyError(
                f"--topology {k} with --agents {n} has density {fmt_num(topo.density)}, "
                f"but --density {fmt_num(d)} was given; drop --density or use "
                "--topology regular/probmad to choose the density"
            )
    return topo


# ---------------------------------------------------------------------------
# centrality
# ---------------------------------------------------------------------------

CENTRALITY_MEASURES = ("degree", "betweenness", "closeness")


def _round(x: float) -> float:
    return round(float(x), 9)


def centrality_order(topo: Topology | nx.Graph, measure: str = "degree") -> list[int]:
    """Agents sorted by decreasing centrality (most central first).

    Used to place stronger models on the most central agents (paper, sec. 6:
    "assigning stronger LLMs to agents with higher centrality consistently
    yields better performance").

    ``measure``:

    * ``"degree"`` (default): number of neighbours; ties broken by
      betweenness centrality, then by lower agent index;
    * ``"betweenness"``: betweenness centrality; ties by degree, then index;
    * ``"closeness"``: closeness centrality; ties by degree, betweenness, index.

    For directed topologies centrality is measured along the flow of
    information: degree is the number of agents that *read* this agent
    (out-degree of :meth:`Topology.graph`), closeness uses distances *from* the
    agent.  Random topologies (ProbMAD) are ranked on their expected graph, on
    which every agent ties, so the order is ``0 .. n-1``.  A networkx graph
    with nodes ``0 .. n-1`` may be passed instead of a topology.
    """
    return [v for cls in centrality_classes(topo, measure) for v in cls]


def centrality_classes(topo: Topology | nx.Graph, measure: str = "degree") -> list[list[int]]:
    """The agents in classes of equal centrality (every key of ``measure`` in
    :func:`centrality_order` but the agent id ties), most central class first,
    each class in ascending id; :func:`centrality_order` is their concatenation.

    A topology that knows its orbits (:meth:`Topology.orbits`) is ranked without
    computing betweenness or closeness (O(N |E|), minutes for a dense graph of
    1,000 agents): one orbit is one class; with ``"degree"``, orbits of distinct
    degrees are ordered by degree. Otherwise networkx computes the measures.
    """
    # function-level: importing networkx here keeps it off start-up
    import networkx as nx

    m = str(measure).strip().lower()
    if m not in CENTRALITY_MEASURES:
        raise TopologyError(f"centrality measure {measure!r}: choose one of {', '.join(CENTRALITY_MEASURES)}")
    orbits = topo.orbits() if isinstance(topo, Topology) else None
    if orbits is not None and len(orbits) == 1:
        return [sorted(orbits[0])]
    if isinstance(topo, Topology):
        g = topo.centrality_graph()
    elif isinstance(topo, nx.Graph):
        g = topo
    else:
        raise TopologyError(f"centrality_order needs a Topology or networkx graph, got {type(topo).__name__}")

    nodes = sorted(g.nodes())
    degree = g.out_degree if g.is_directed() else g.degree
    if orbits is not None and m == "degree":
        by_degree = {int(degree(o[0])): sorted(o) for o in orbits}
        if len(by_degree) == len(orbits):  # every orbit has its own degree: no betweenness needed
            return [by_degree[d] for d in sorted(by_degree, reverse=True)]
    deg = {v: degree(v) for v in nodes}
    if g.is_directed():
        clo = nx.closeness_centrality(g.reverse(copy=True)) if m == "closeness" else {}
    else:
        clo = nx.closeness_centrality(g) if m == "closeness" else {}
    btw = nx.betweenness_centrality(g) if len(nodes) > 0 else {}

    def sort_key(v: int) -> tuple:
        d, b = deg[v], _round(btw.get(v, 0.0))
        if m == "degree":
            return (-d, -b)
        if m == "betweenness":
            return (-b, -d)
        return (-_round(clo.get(v, 0.0)), -d, -b)

    classes: list[list[int]] = []
    for v in sorted(nodes, key=lambda v: (sort_key(v), v)):
        if classes and sort_key(classes[-1][-1]) == sort_key(v):
            classes[-1].append(v)
        else:
            classes.append([v])
    return classes
