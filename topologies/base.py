"""Core types shared by every communication topology.

Vocabulary used throughout the package
--------------------------------------
* Agents are numbered ``0 .. n-1``.
* Round 0 is the independent-answer round: nobody reads anybody.
* In a debate round ``t >= 1`` agent ``i`` reads the round ``t-1`` replies of
  the agents listed in ``peers(t, key)[i]``.  An agent never appears in its
  own peer list (its own previous answer is always available to it; what the
  engine does with an agent that has no peers -- a self-check -- is the
  engine's business).
* ``graph(t, key)`` is the same information as a :class:`networkx.DiGraph`
  with an edge ``src -> dst`` whenever ``dst`` reads ``src``, i.e. edges point
  in the direction the information flows.
"""

from __future__ import annotations

import abc
import math
import operator
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from engine.errors import UserError

if TYPE_CHECKING:  # networkx is imported where a graph is built: it costs 0.3 s at start-up
    import networkx as nx

__all__ = ["TopologyError", "Topology"]


class TopologyError(UserError, ValueError):
    """Invalid topology request.

    Messages name the command-line flags (``--agents``, ``--density``,
    ``--topology``, ``--edges``, ``--center``, ``--seed``) with the offending
    values, so the CLI can show them to the user unchanged.
    """


# ---------------------------------------------------------------------------
# small validation / formatting helpers (package-internal)
# ---------------------------------------------------------------------------


def fmt_num(x: float) -> str:
    """Short human form of a density: 0.4, 1, 0.666667."""
    x = float(x)
    if x == int(x):
        return str(int(x))
    return f"{x:.6g}"


def fmt_ratio(k: int, m: int) -> str:
    """``k/m`` as ``--density`` accepts it exactly: a decimal when it has a short exact one (``2/5``
    -> ``0.4``, ``5/5`` -> ``1``), else the reduced fraction (``1/3``, ``500/999``)."""
    exact = Fraction(k, m)
    short = fmt_num(float(exact))
    return short if Fraction(short) == exact else f"{exact.numerator}/{exact.denominator}"


def check_n(n: Any) -> int:
    """Validate an agent count and return it as a plain int."""
    if isinstance(n, bool):
        raise TopologyError(f"--agents {n!r}: the number of agents must be an integer >= 1")
    try:
        value = operator.index(n)
    except TypeError:
        raise TopologyError(f"--agents {n!r}: the number of agents must be an integer >= 1") from None
    if value < 1:
        raise TopologyError(f"--agents {value}: need at least 1 agent")
    return value


def check_unit_interval(value: Any, flag: str, n: int | None = None) -> float:
    """Validate a probability/density in [0, 1] and return it as a float."""
    where = f"{flag} {value!r}" if n is None else f"{flag} {value!r} with --agents {n}"
    if isinstance(value, bool):
        raise TopologyError(f"{where}: must be a number between 0 and 1")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise TopologyError(f"{where}: must be a number between 0 and 1") from None
    if math.isnan(x) or x < 0.0 or x > 1.0:
        where = f"{flag} {fmt_num(x) if not math.isnan(x) else 'nan'}"
        if n is not None:
            where += f" with --agents {n}"
        raise TopologyError(f"{where}: must be between 0 and 1")
    return x


def check_int(value: Any, what: str) -> int:
    """Coerce an integer-like value (round number, key, seed) or raise."""
    if isinstance(value, bool):
        raise TopologyError(f"{what} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TopologyError(f"{what} must be an integer, got {value!r}") from None


def check_round(round: Any) -> int:  # noqa: A002 - the public API uses `round`
    r = check_int(round, "round")
    if r < 0:
        raise TopologyError(f"round must be >= 0, got {r}")
    return r


# ---------------------------------------------------------------------------
# abstract base
# ---------------------------------------------------------------------------


class Topology(abc.ABC):
    """Who reads whom in each debate round.

    Attributes
    ----------
    n:
        Number of agents (ids ``0 .. n-1``).
    name:
        Short label for logs and result records, e.g. ``"ring"``,
        ``"regular(D=0.6,k=3)"`` or ``"probmad(p=0.4)"``.
    directed:
        ``False`` when reading is mutual (undirected static graphs).
    """

    n: int
    name: str
    directed: bool

    # -- to implement ------------------------------------------------------
    @abc.abstractmethod
    def _peers(self, round: int, key: int) -> dict[int, list[int]]:  # noqa: A002
        """Peer lists for a validated ``round >= 1`` and integer ``key``."""

    @property
    @abc.abstractmethod
    def density(self) -> float:
        """Edge density (static graphs) or per-pair reading probability (ProbMAD)."""

    # -- public API ----------------------------------------------------------
    def peers(self, round: int, key: int = 0) -> dict[int, list[int]]:  # noqa: A002
        """Agents whose round ``round-1`` replies each agent reads in ``round``.

        Returns ``{agent: sorted list of peer ids}`` for every agent
        ``0 .. n-1``.  ``round == 0`` gives every agent ``[]``.  ``key`` is a
        per-question integer seed; static graphs ignore it.  The lists are
        fresh objects, so callers may mutate them.  An agent is never its
        own peer.
        """
        r = check_round(round)
        k = check_int(key, "key")
        if r == 0:
            return {i: [] for i in range(self.n)}
        return self._peers(r, k)

    def graph(self, round: int = 1, key: int = 0) -> nx.DiGraph:  # noqa: A002
        """Reading graph of one round: edge ``src -> dst`` when ``dst`` reads ``src``.

        Always contains every agent as a node (isolated agents included).
        Meant for recording; the returned graph is a fresh object.
        """
        # function-level: importing networkx here keeps it off start-up
        import networkx as nx

        g = nx.DiGraph()
        g.add_nodes_from(range(self.n))
        for dst, srcs in self.peers(round, key).items():
            g.add_edges_from((src, dst) for src in srcs)
        return g

    def degrees(self, round: int = 1, key: int = 0) -> dict[int, int]:  # noqa: A002
        """Number of peers each agent reads (``round``/``key`` matter only for
        random topologies)."""
        return {i: len(p) for i, p in self.peers(round, key).items()}

    def centrality_graph(self) -> nx.Graph:
        """Graph on which :func:`topologies.centrality_order` ranks agents.

        Default: the round-1 reading graph for key 0.  Static topologies
        return their fixed graph; ProbMAD returns its expected (complete or
        empty) graph, on which all agents tie.
        """
        return self.graph(1, 0)

    def orbits(self) -> list[list[int]] | None:
        """Classes of agents that a symmetry of :meth:`centrality_graph` maps onto each other
        (so every centrality ties within a class), when the topology knows them: one class for
        a vertex-transitive graph (regular circulant graphs, the ring, the complete graph, the
        expected graph of ProbMAD), the centre and the leaves of a star. None: not known.
        :func:`topologies.centrality_order` uses them to skip computing centralities."""
        return None

    def describe(self) -> dict[str, Any]:
        """JSON-friendly summary for result records."""
        return {
            "kind": type(self).__name__,
            "name": self.name,
            "n": self.n,
            "directed": self.directed,
            "density": self.density,
        }

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} n={self.n} density={fmt_num(self.density)}>"
