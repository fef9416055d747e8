"""CortexDebate's sparse, weighted, per-round debating graph: the pure math of eqs. 1-12.

"CortexDebate: Debating Sparsely and Equally for Multi-Agent Debate" (paper in
``/work/shared/papers/cortex-debate.txt``). The MDM module ("McKinsey-based Debate Matter")
weights every directed edge ``i -> j`` (agent ``j`` reads agent ``i``) with the McKinsey Trust
Formula and keeps, for each reader ``j``, the incoming edges whose weight is at least the mean:

* eq. 1  ``T = C * R * I / S``                                   :func:`trust`
* eq. 2  confidence recalibration into the bands 0.3 / [0.3, 0.6) / 0.6 / 0.8   :func:`recalibrate`
* eq. 3  ``L(N, M) = 406.4 / N**0.34 + 410.7 / M**0.28 + 1.69``  :func:`pretraining_loss`
* eq. 4  credibility ``C = 1 / L(N, M)``                          :func:`credibility`
* eq. 5  reliability ``R_d = (R_{d-1} (d-1) + H_i^{d-1}) / d``    :func:`reliability`
* eq. 6  ``Sim_d = (Sim_{d-1} (d-1) + cos(O_i^{d-1}, O_j^{d-1})) / d``  :func:`mean_similarity`
* eq. 7  intimacy ``I_d = 1 - Sim_d``                             :func:`intimacy`
* eq. 8  self-orientation ``S_d = (d-1)(n-1) - P_d``              :func:`self_orientation`
* eq. 9  ``W_{i->j}^d = C_d R_d I_d / S_d``                       :func:`weight_matrix`
* eq. 10 ``mean_j = 1/(n-1) sum_{i != j} W_{i->j}``               :func:`mean_incoming`
* eq. 11 keep ``i -> j`` iff ``W_{i->j} >= mean_j``               :func:`prune`
* eq. 12 ``Deb_j = {i : kept i -> j}``                            :func:`debate_peers`

:class:`MDMState` strings them together across rounds (running means of eqs. 5/6 and the
participation count ``P`` of eq. 8). Everything here takes numbers/arrays and returns numbers,
arrays, peer lists or a :class:`networkx.DiGraph`; no text, no model, no Ray.

Conventions: agents are ``0..n-1``; matrices are indexed ``[i, j]`` = edge ``i -> j`` (``i`` the
head / speaker, ``j`` the tail / reader), so **column** ``j`` holds the edges *into* ``j``. The
diagonal is ``nan`` (no self-edges). ``d`` is the 1-based debate round (round 0 = initial answers).

Where the paper is vague (each choice is also stated at the function concerned):

* **Units in eq. 3.** The constants are Hoffmann et al. (2022)'s Chinchilla fit ("approach 3":
  E = 1.69, A = 406.4, B = 410.7, alpha = 0.34, beta = 0.28), which is defined for N in
  parameters and M in training tokens (raw counts). :func:`credibility` therefore takes billions
  of parameters and trillions of tokens and converts to raw counts.
* **Which participation counts as P_d (eq. 8).** "the number of times that A_i has debated with
  other LLM agents"; eq. 12 calls ``Deb_j`` "the debating opponents for A_j", i.e. the agents
  ``j`` *reads*. We count, for agent ``i``, the peers it read in rounds ``1..d-1``
  (``sum_t |Deb_i^t|``, its in-degree), whose per-round maximum is ``n-1`` as eq. 8 says. Counting
  how often ``i`` was *read* instead would reward popular agents with more weight
  (rich-get-richer), the overconfidence/dominance the paper sets out to avoid.
* **S_d = 0 (eq. 8/9).** In round 1 every agent has ``S_1 = (1-1)(n-1) - 0 = 0`` and eq. 9
  divides by zero; an agent that read every peer in every earlier round also has ``S_d = 0``.
  Taken literally (``W = +inf``) round 1 keeps every edge, so every agent reads all others,
  so ``S_2 = 0`` again, and so on: the graph would never become sparse, contradicting the
  paper's results (sparser contexts, Table 4/5). We add a smoothing offset (default 1, config
  ``cortex_s_offset``): ``S_d = (d-1)(n-1) - P_d + offset``. It keeps eq. 8's ordering (more
  participation -> lower S -> higher weight) and makes round 1 ``W = C R I``. ``offset = 0``
  gives the literal formula, with ``x / 0 = +inf`` for ``x > 0`` and ``0 / 0 = 0`` (an edge
  with no intimacy carries nothing new).
* **Ties in eq. 11 and floating point.** ``>=`` is evaluated with a relative tolerance of
  ``1e-9`` so that equal weights, whose computed mean can exceed them by one ulp, are all kept.
  With ``n >= 2`` the largest incoming weight is never below the mean, so every agent keeps at
  least one peer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import numpy as np

if TYPE_CHECKING:  # imported where a graph is built (start-up time)
    import networkx as nx

__all__ = [
    "CHINCHILLA_A",
    "CHINCHILLA_B",
    "CHINCHILLA_ALPHA",
    "CHINCHILLA_BETA",
    "CHINCHILLA_E",
    "GRAPHS",
    "WEIGHTS",
    "CortexRound",
    "MDMState",
    "ablation_weights",
    "by_weight",
    "credibility",
    "debate_peers",
    "edge_graph",
    "full_keep",
    "intimacy",
    "mean_incoming",
    "mean_similarity",
    "pretraining_loss",
    "prune",
    "recalibrate",
    "reliability",
    "self_orientation",
    "trust",
    "weight_matrix",
]

# eq. 3 constants: Hoffmann et al. (2022), "Training Compute-Optimal Large Language Models",
# parametric loss fit L(N, D) = E + A / N^alpha + B / D^beta (their approach 3).
CHINCHILLA_A = 406.4
CHINCHILLA_B = 410.7
CHINCHILLA_ALPHA = 0.34
CHINCHILLA_BETA = 0.28
CHINCHILLA_E = 1.69

PRUNE_RTOL = 1e-9  # relative tolerance of ">=" in eq. 11


# --------------------------------------------------------------------------- eq. 1 / eq. 9


def trust(c: float, r: float, i: float, s: float) -> float:
    """Eq. 1 (McKinsey Trust Formula) and eq. 9 (edge weight): ``C * R * I / S``.

    ``S = 0`` (only reachable with ``cortex_s_offset = 0``): ``+inf`` if ``C R I > 0`` else 0.
    """
    num = float(c) * float(r) * float(i)
    s = float(s)
    if s == 0.0:
        return math.inf if num > 0 else 0.0
    return num / s


# --------------------------------------------------------------------------- eq. 2


def recalibrate(h: float | None) -> float:
    """Eq. 2: 0.8 if H >= 0.8; 0.6 if 0.6 <= H < 0.8; H if 0.3 <= H < 0.6; 0.3 if H < 0.3.

    ``None`` (a confidence that could not be read from the reply) is the lowest band, 0.3.
    """
    if h is None or (isinstance(h, float) and math.isnan(h)):
        return 0.3
    h = float(h)
    if h >= 0.8:
        return 0.8
    if h >= 0.6:
        return 0.6
    if h >= 0.3:
        return h
    return 0.3


# --------------------------------------------------------------------------- eq. 3 / eq. 4


def pretraining_loss(n_params: float, n_tokens: float) -> float:
    """Eq. 3: ``L(N, M) = 406.4 / N**0.34 + 410.7 / M**0.28 + 1.69`` (raw counts, not billions)."""
    if not n_params > 0 or not n_tokens > 0:
        raise ValueError(f"parameter and token counts must be positive (got N={n_params}, M={n_tokens})")
    return (
        CHINCHILLA_A / float(n_params) ** CHINCHILLA_ALPHA
        + CHINCHILLA_B / float(n_tokens) ** CHINCHILLA_BETA
        + CHINCHILLA_E
    )


def credibility(params_b: float, tokens_t: float) -> float:
    """Eq. 4: ``C = 1 / L(N, M)`` with N = ``params_b`` * 1e9 parameters, M = ``tokens_t`` * 1e12 tokens."""
    return 1.0 / pretraining_loss(float(params_b) * 1e9, float(tokens_t) * 1e12)


# --------------------------------------------------------------------------- eq. 5 - 8


# eqs. 5 - 8 take one agent's numbers (floats) or every agent's at once (arrays), and return the same kind
_Num = TypeVar("_Num", float, np.ndarray)
# eqs. 9 - 10 take per-agent vectors as lists or arrays
_Floats = Sequence[float] | np.ndarray


def reliability(prev: _Num, d: int, h_prev: _Num) -> _Num:
    """Eq. 5: ``R_d = (R_{d-1} (d-1) + H^{d-1}) / d`` — the running mean of the (recalibrated)
    confidences of rounds ``0..d-1``. At ``d = 1`` ``R_1 = H^0`` whatever ``prev`` is."""
    if d < 1:
        raise ValueError(f"debate round d must be >= 1 (got {d})")
    return (prev * (d - 1) + h_prev) / d


def mean_similarity(prev: _Num, d: int, cos_prev: _Num) -> _Num:
    """Eq. 6: ``Sim_d = (Sim_{d-1} (d-1) + cos(O_i^{d-1}, O_j^{d-1})) / d`` (elementwise on matrices)."""
    if d < 1:
        raise ValueError(f"debate round d must be >= 1 (got {d})")
    return (prev * (d - 1) + cos_prev) / d


def intimacy(sim_bar: _Num) -> _Num:
    """Eq. 7: ``I_d = 1 - Sim_d`` (average difference of viewpoints)."""
    return 1.0 - sim_bar


def self_orientation(d: int, n: int, p: _Num, offset: float = 1.0) -> _Num:
    """Eq. 8: ``S_d = (d-1)(n-1) - P_d`` (+ ``offset``, our smoothing; 0 = the literal formula).

    ``P_d`` = peers the agent read in rounds ``1..d-1`` (see the module docstring for why).
    """
    if d < 1:
        raise ValueError(f"debate round d must be >= 1 (got {d})")
    return (d - 1) * (n - 1) - p + offset


# --------------------------------------------------------------------------- eq. 9 - 12


def weight_matrix(c: _Floats, r: _Floats, i_mat: np.ndarray, s: _Floats) -> np.ndarray:
    """Eq. 9 for every edge: ``W[i, j] = C_i R_i I[i, j] / S_i`` (edge ``i -> j``; diagonal nan).

    Credibility, reliability and self-orientation belong to the head ``i`` (the agent being read,
    sec. 3.2: "credibility evaluates the professional competence of A_i"), intimacy to the pair.
    Elementwise :func:`trust` (the same products in the same order), vectorised.
    """
    c, r, s = (np.asarray(x, dtype=float) for x in (c, r, s))
    i_mat = np.asarray(i_mat, dtype=float)
    n = len(c)
    if i_mat.shape != (n, n) or len(r) != n or len(s) != n:
        raise ValueError(f"shapes disagree: C {c.shape}, R {r.shape}, S {s.shape}, I {i_mat.shape}")
    num = (c * r)[:, None] * i_mat
    head = np.broadcast_to(s[:, None], (n, n))
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(head == 0.0, np.where(num > 0, math.inf, 0.0), num / head)
    np.fill_diagonal(w, np.nan)
    return w


def _off_diagonal_columns(w: np.ndarray) -> np.ndarray:
    """``out[j]`` = column ``j`` of the square ``w`` without its diagonal entry (``i`` ascending)."""
    n = w.shape[0]
    return w.T[~np.eye(n, dtype=bool)].reshape(n, n - 1)


def mean_incoming(w: np.ndarray) -> np.ndarray:
    """Eq. 10: ``mean_j = 1/(n-1) * sum_{i != j} W[i, j]`` — the mean of column ``j`` off the diagonal
    (an exact sum, :func:`math.fsum`; ``+inf`` when the column holds an infinite weight).

    ``n = 1`` has no edges: the mean is ``nan``.
    """
    w = np.asarray(w, dtype=float)
    n = w.shape[0]
    if n < 2:
        return np.full(n, np.nan)
    cols = _off_diagonal_columns(w)
    infinite = np.isinf(cols).any(axis=1)
    return np.array([math.inf if inf else math.fsum(col) / (n - 1) for col, inf in zip(cols.tolist(), infinite)])


def prune(w: np.ndarray, mean: np.ndarray | None = None, rtol: float = PRUNE_RTOL) -> np.ndarray:
    """Eq. 11: boolean ``keep[i, j]`` = ``W[i, j] >= mean_j`` (``i != j``); edges below the mean go.

    ``>=`` with a relative tolerance ``rtol`` (equal weights are all kept despite rounding);
    ``+inf >= +inf`` holds, so with infinite weights exactly the infinite edges stay.
    """
    w = np.asarray(w, dtype=float)
    mean = mean_incoming(w) if mean is None else np.asarray(mean, dtype=float)
    m = mean[None, :]
    with np.errstate(invalid="ignore"):
        threshold = m - rtol * np.maximum(np.abs(m), 1e-300)
        keep = np.where(np.isinf(m), w == m, w >= threshold)
    keep &= ~np.isnan(w)
    np.fill_diagonal(keep, False)
    return keep


def debate_peers(keep: np.ndarray) -> list[list[int]]:
    """Eq. 12: ``Deb_j = [i : keep[i, j], i != j]`` for every reader ``j`` (ascending ``i``)."""
    keep = np.array(keep, dtype=bool)
    np.fill_diagonal(keep, False)
    return [np.flatnonzero(col).tolist() for col in keep.T]


def by_weight(w: np.ndarray) -> list[list[int]]:
    """Every reader ``j``'s heads ``i != j`` by descending ``W[i, j]``, then ascending ``i``
    (the fully connected graph's reading order)."""
    w = np.asarray(w, dtype=float)
    n = w.shape[0]
    if n < 2:
        return [[] for _ in range(n)]
    order = np.argsort(-_off_diagonal_columns(w), axis=1, kind="stable")  # stable: ties by ascending i
    heads = order + (order >= np.arange(n)[:, None])  # positions in the column without j -> agent ids
    return heads.tolist()


WEIGHTS = ("mdm", "mdm-individual", "self", "peer", "none")
GRAPHS = ("sparse", "full")


def ablation_weights(
    mode: str, c: _Floats, r: _Floats, i_mat: np.ndarray, s: _Floats, h: _Floats
) -> tuple[np.ndarray, np.ndarray]:
    """Edge weights ``W[i, j]`` and each reader's threshold for the CortexDebate ablations
    (paper's Table 2 and appendix D):

    * ``mdm``: eq. 9 (``C_i R_i I_ij / S_i``), threshold eq. 10 (mean incoming weight);
    * ``mdm-individual``: "MDM w/o I_d and S_d": ``C_i R_i`` (credibility and reliability, the
      individual abilities), threshold eq. 10;
    * ``self``: self-evaluation (RECONCILE): ``W[i, j] = H_i``, the head's own recalibrated
      confidence; appendix D: "only debate with the agents whose confidence scores are above
      the average of the entire graph", so the threshold is the mean over all n agents;
    * ``peer``: peer evaluation (PRD-style): ``W[i, j] = h_i`` where ``h`` is now the head's
      *peer score*, the mean of the scores the other agents gave its answer; appendix D: "the final
      score of the answer is the average of the received scores. Each LLM agent will only debate
      with the LLM agents whose scores are above the average of the entire graph" — the same rule
      as ``self``, on other numbers;
    * ``none``: every weight 1 (only with the fully connected graph).
    """
    n = len(c)
    ones, all_ones = np.ones(n), np.ones((n, n))
    if mode == "mdm":
        w = weight_matrix(c, r, i_mat, s)
        return w, mean_incoming(w)
    if mode == "mdm-individual":
        w = weight_matrix(c, r, all_ones, ones)
        return w, mean_incoming(w)
    if mode in ("self", "peer"):  # the head's confidence / peer score in eq. 9's C slot, every other factor 1
        w = weight_matrix(h, ones, all_ones, ones)
        return w, np.full(n, math.fsum(h) / n if n else np.nan)
    if mode == "none":
        return weight_matrix(ones, ones, all_ones, ones), ones
    raise ValueError(f"--cortex-weights {mode!r} is not one of {', '.join(WEIGHTS)}")


def full_keep(n: int) -> np.ndarray:
    """The fully connected graph's ``keep``: every edge but the self-loops."""
    return ~np.eye(n, dtype=bool)


def edge_graph(w: np.ndarray, keep: np.ndarray) -> nx.DiGraph:
    """The round's sparse debating graph: edge ``i -> j`` (``j`` reads ``i``) with ``weight = W[i, j]``."""
    n = np.asarray(w).shape[0]
    # function-level: importing networkx here keeps it off start-up
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    readers, heads = np.nonzero((np.array(keep, dtype=bool) & ~np.eye(n, dtype=bool)).T)  # by reader, then head
    g.add_weighted_edges_from(
        zip(heads.tolist(), readers.tolist(), np.asarray(w, dtype=float)[heads, readers].tolist())
    )
    return g


# --------------------------------------------------------------------------- state across rounds


@dataclass
class CortexRound:
    """Everything MDM computed for debate round ``d`` (the inputs of eq. 9 and its outputs)."""

    d: int
    reliability: list[float]  # R_d per agent (eq. 5)
    intimacy: list[list[float]]  # I_d[i][j] (eq. 7)
    self_orientation: list[float]  # S_d per agent (eq. 8, with the offset)
    weights: np.ndarray  # W[i, j] (eq. 9), diagonal nan
    mean: np.ndarray  # mean incoming weight per reader (eq. 10)
    keep: np.ndarray  # eq. 11
    peers: list[list[int]]  # Deb_j (eq. 12)

    def peer_weights(self, j: int) -> list[float]:
        """Pre-pruning weights (eq. 9) of the edges agent ``j`` keeps, in ``peers[j]`` order."""
        return self.weights[self.peers[j], j].tolist()

    def graph(self) -> nx.DiGraph:
        return edge_graph(self.weights, self.keep)


@dataclass
class MDMState:
    """Running state of the MDM module for one question (Alg. 1, phase 2, steps 1-2).

    ``credibility``: ``C`` per agent (eq. 4, fixed for the question). Call :meth:`step` once per
    debate round ``d = 1, 2, ...`` with the recalibrated confidences ``H^{d-1}`` and the cosine
    matrix of the outputs ``O^{d-1}``; it updates the running means (eqs. 5-6), computes the
    weights and the pruned graph, and adds each agent's number of peers to ``P`` (eq. 8).
    """

    credibility: list[float]
    s_offset: float = 1.0
    weights_mode: str = "mdm"  # --cortex-weights (ablation_weights)
    graph: str = "sparse"  # --cortex-graph: "full" keeps every edge (peers listed by descending weight)
    d: int = 0
    r: np.ndarray = field(init=False)
    sim: np.ndarray = field(init=False)
    p: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.credibility)
        self.r = np.zeros(n)  # R_0 (unused: eq. 5 multiplies it by d-1 = 0)
        self.sim = np.zeros((n, n))  # Sim_0 (unused likewise)
        self.p = np.zeros(n)  # P_1 = 0 (Alg. 1 line 5)

    @property
    def n(self) -> int:
        return len(self.credibility)

    def step(
        self,
        h_prev: Sequence[float],
        cos_prev: Sequence[Sequence[float]] | np.ndarray,
        peer_scores: Sequence[float] | None = None,
    ) -> CortexRound:
        """``peer_scores``: each head's peer score (``weights_mode="peer"`` only, where it is required)."""
        n = self.n
        h = np.asarray(h_prev, dtype=float)
        cos = np.asarray(cos_prev, dtype=float)
        if h.shape != (n,) or cos.shape != (n, n):
            raise ValueError(f"need {n} confidences and an {n}x{n} similarity matrix (got {h.shape}, {cos.shape})")
        if (self.weights_mode == "peer") != (peer_scores is not None) or (
            peer_scores is not None and len(peer_scores) != n
        ):
            raise ValueError(f"peer scores (n={n}) are given with weights_mode 'peer' and only then")
        head = h if peer_scores is None else np.asarray(peer_scores, dtype=float)
        d = self.d + 1
        self.r = reliability(self.r, d, h)  # eq. 5
        self.sim = mean_similarity(self.sim, d, cos)  # eq. 6
        i_mat = intimacy(self.sim)  # eq. 7
        s = self_orientation(d, n, self.p, self.s_offset)  # eq. 8
        w, mean = ablation_weights(self.weights_mode, self.credibility, self.r, i_mat, s, head)  # eqs. 9-10
        if self.graph == "full":  # ablation: no pruning; heads listed by descending weight, then id
            keep = full_keep(n)
            peers = by_weight(w)
        else:
            keep = prune(w, mean)  # eq. 11
            peers = debate_peers(keep)  # eq. 12
        self.p = self.p + np.array([len(pj) for pj in peers], dtype=float)  # P_{d+1}
        self.d = d
        return CortexRound(
            d=d,
            reliability=np.asarray(self.r, dtype=float).tolist(),
            intimacy=np.asarray(i_mat, dtype=float).tolist(),
            self_orientation=np.asarray(s, dtype=float).tolist(),
            weights=w,
            mean=mean,
            keep=keep,
            peers=peers,
        )
