"""ProbMAD: a random topology redrawn every round (paper, appendix E).

"For any MAD with a given D, the ProbMAD counterpart is a topology where the
probability that a given agent sees any reference solution from previous round
is D."  Here: in round ``t`` of question ``key``, agent ``i`` reads agent
``j != i`` independently with probability ``p``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .base import Topology, check_int, check_n, check_unit_interval, fmt_num

if TYPE_CHECKING:  # imported where a graph is built (start-up time)
    import networkx as nx

__all__ = ["ProbMAD"]


def _words(value: int) -> list[int]:
    """Injective encoding of any Python int as a list of uint32 words.

    Zig-zag maps negatives to odd numbers (0,-1,1,-2,... -> 0,1,2,3,...), the
    result is split into 32-bit words and prefixed by the word count, so
    sequences of encoded values can never collide.
    """
    z = 2 * value if value >= 0 else -2 * value - 1
    out = []
    while True:
        out.append(z & 0xFFFFFFFF)
        z >>= 32
        if not z:
            break
    return [len(out), *out]


class ProbMAD(Topology):
    """Probabilistic topology: every (reader, source) pair is an independent
    Bernoulli(``p``) draw, resampled for every round and every question.

    Randomness: round ``t`` of question ``key`` uses its own generator
    ``numpy.random.default_rng(SeedSequence(words(seed) + words(key) + words(t)))``
    (an injective encoding of ``(seed, key, t)``; negative and huge integers are
    fine).  The generator fills an ``n x n`` matrix ``U`` of uniforms and agent
    ``i`` reads agent ``j != i`` iff ``U[i, j] < p``.  Hence

    * the result depends only on ``(seed, key, round, n, p)`` -- never on how
      many calls came before or in which order;
    * each pair's draw is its own uniform, independent of every other pair,
      round and question;
    * for fixed ``(seed, key, round)`` the peer sets are nested in ``p``
      (raising ``p`` only adds peers), so comparisons across ``p`` are coupled;
    * ``p = 0`` gives every agent ``[]``, ``p = 1`` gives everybody.

    An agent that draws no peer gets ``[]``; it then self-checks (that is up to
    the engine).  The reading relation is directed: ``i`` reading ``j`` says
    nothing about ``j`` reading ``i``.  ``density`` is ``p`` -- the expected
    fraction of the ``n - 1`` other agents each agent reads.
    """

    directed = True

    def __init__(self, n: int, p: float, seed: int = 0):
        self.n = check_n(n)
        self.p = check_unit_interval(p, "--density", self.n)
        self.seed = check_int(seed, "--seed")
        self.name = f"probmad(p={fmt_num(self.p)})"

    @property
    def density(self) -> float:
        return self.p

    @property
    def expected_degree(self) -> float:
        """Expected number of peers per agent, ``p (n - 1)``."""
        return self.p * (self.n - 1)

    def rng(self, round: int, key: int = 0) -> np.random.Generator:  # noqa: A002
        """The generator used for ``(round, key)`` (fresh each call)."""
        entropy = _words(self.seed) + _words(check_int(key, "key")) + _words(check_int(round, "round"))
        return np.random.default_rng(np.random.SeedSequence(entropy))

    def reads_matrix(self, round: int, key: int = 0) -> np.ndarray:  # noqa: A002
        """Boolean ``n x n`` matrix, ``[i, j]`` True when agent i reads agent j."""
        n = self.n
        u = self.rng(round, key).random((n, n))
        m = u < self.p
        np.fill_diagonal(m, False)
        return m

    def _peers(self, round: int, key: int) -> dict[int, list[int]]:  # noqa: A002
        m = self.reads_matrix(round, key)
        return {i: np.flatnonzero(row).tolist() for i, row in enumerate(m)}

    def centrality_graph(self) -> nx.Graph:
        """All agents are exchangeable in expectation: the complete digraph
        (``p > 0``) or the empty one (``p = 0``); every agent ties."""
        # function-level: importing networkx here keeps it off start-up
        import networkx as nx

        g = (
            nx.complete_graph(self.n, create_using=nx.DiGraph)
            if self.p > 0
            else nx.empty_graph(self.n, create_using=nx.DiGraph)
        )
        return g

    def orbits(self) -> list[list[int]]:
        """The expected graph is complete or empty: one class."""
        return [list(range(self.n))]

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d.update(p=self.p, seed=self.seed)
        return d
