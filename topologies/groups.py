"""Groups for GroupDebate (Liu et al., AAMAS 2026) and S2-MAD (Zeng et al., NAACL 2025).

Pure logic, no model: how the M agents are split into N groups, which round of a run is the
first answer, an intra-group round or an inter-group round, who reads whom in each of them, and
S2-MAD's *Decision-Making Mechanism* (similarity, redundancy filter, conditional participation)
as functions of answers or of a similarity matrix.

Vocabulary (both papers, rounds here are 0-based like everywhere in the engine):

* ``T`` = ``--rounds`` (all rounds, the first answer included), ``R`` = ``--stage-rounds``
  (rounds per stage), ``S = ceil(T / R)`` stages (GD sec. 3.1: ``T = S x R``; Alg. 1 runs
  ``t = (s-1)R+1 .. min(sR, T)``, so the last stage may be shorter).
* Round ``t`` is in stage ``t // R``. Round 0 is the *first* answer; the first round of every
  later stage is *inter-group* (agents read the group summaries made at the end of the previous
  stage); every other round is *intra-group* (agents read their group mates' previous replies).
* Group summaries are made after the last round of every stage but the last (Alg. 1 line 30).

Group assignment (Alg. 1 line 1, "Initialize and shuffle the agents randomly"): the agents are
shuffled with a RNG seeded from the run's ``--seed`` only, *not* per question, so every question
of a run is debated by the same groups and results across questions are comparable. Within a
group agents are listed in increasing id.
"""

from __future__ import annotations

import functools
import math
import operator
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import TopologyError, check_n

__all__ = [
    "Groups",
    "RoundPlan",
    "parse_group_sizes",
    "default_group_sizes",
    "make_groups",
    "stage_plan",
    "n_stages",
    "summary_after",
    "similar_by_answer",
    "similar_by_cosine",
    "differing",
    "redundancy_filter",
    "dedup",
    "participates",
    "all_similar",
]


# ---------------------------------------------------------------------------
# group sizes and assignment
# ---------------------------------------------------------------------------


def default_group_sizes(n: int) -> list[int]:
    """Our default when ``--groups`` is not given: 2 groups if ``n >= 4`` else 1 group.

    The papers give no default; both run their main experiments with 2 groups of near-equal
    size for 4-6 agents (GD fig. 4: 4 agents in 2 groups; GD table 2 best: 3+3), so 2 groups is
    the natural default. With fewer than 4 agents a group of 1 would never debate inside its
    group, so we keep one group.
    """
    n = check_n(n)
    return _equal_sizes(n, 2 if n >= 4 else 1)


def _equal_sizes(n: int, k: int) -> list[int]:
    """``k`` sizes summing to ``n`` that differ by at most 1, larger ones first."""
    base, extra = divmod(n, k)
    return [base + 1 if g < extra else base for g in range(k)]


def parse_group_sizes(spec: Any, n: int) -> list[int]:
    """Group sizes from ``--groups``.

    * ``None`` -> :func:`default_group_sizes`;
    * ``"2+2+4"`` (or a list ``[2, 2, 4]``) -> those sizes; they must be positive integers
      summing to ``--agents``;
    * ``"3"`` (or the int 3) -> that many groups of equal size; when ``--agents`` is not a
      multiple, sizes differ by one, larger groups first (7 agents, "3" -> 3+2+2).

    Any problem raises :class:`TopologyError` naming ``--groups`` and ``--agents``.
    """
    n = check_n(n)
    if spec is None:
        return default_group_sizes(n)
    where = f"--groups {spec!r} with --agents {n}"
    hint = "use group sizes like '2+2+4' that add up to --agents, or a number of equal groups like '2'"
    if isinstance(spec, bool):
        raise TopologyError(f"{where}: not a group spec; {hint}")
    if isinstance(spec, (list, tuple)):
        parts: list[Any] = list(spec)
        if not parts:
            raise TopologyError(f"{where}: no group sizes given; {hint}")
        sizes = []
        for p in parts:
            if isinstance(p, bool):
                raise TopologyError(f"{where}: group size {p!r} is not an integer; {hint}")
            try:
                sizes.append(operator.index(p))
            except TypeError:
                raise TopologyError(f"{where}: group size {p!r} is not an integer; {hint}") from None
        return _check_sizes(sizes, n, where, hint)
    if isinstance(spec, int):
        return _n_groups(spec, n, where, hint)
    if not isinstance(spec, str):
        raise TopologyError(f"{where}: not a group spec; {hint}")
    text = spec.strip()
    if not text:
        raise TopologyError(f"{where}: empty; {hint}")
    tokens = [t.strip() for t in text.split("+")]
    for t in tokens:
        if not re.fullmatch(r"[+-]?\d+", t):
            raise TopologyError(f"{where}: {t!r} is not a whole number; {hint}")
    values = [int(t) for t in tokens]
    if len(values) == 1:
        return _n_groups(values[0], n, where, hint)
    return _check_sizes(values, n, where, hint)


def _n_groups(k: int, n: int, where: str, hint: str) -> list[int]:
    if k < 1:
        raise TopologyError(f"{where}: the number of groups must be at least 1; {hint}")
    if k > n:
        raise TopologyError(f"{where}: {k} groups need at least {k} agents (one per group); {hint}")
    return _equal_sizes(n, k)


def _check_sizes(sizes: list[int], n: int, where: str, hint: str) -> list[int]:
    bad = [s for s in sizes if s < 1]
    if bad:
        raise TopologyError(f"{where}: group size {bad[0]} is not positive; every group needs at least one agent")
    if len(sizes) > n:
        raise TopologyError(f"{where}: {len(sizes)} groups need at least {len(sizes)} agents; {hint}")
    if sum(sizes) != n:
        raise TopologyError(f"{where}: the group sizes add up to {sum(sizes)}, not to the {n} agents; {hint}")
    return sizes


@dataclass(frozen=True)
class Groups:
    """A partition of agents ``0 .. n-1`` into groups (each a sorted tuple of agent ids)."""

    members: tuple[tuple[int, ...], ...]

    @property
    def n(self) -> int:
        return sum(len(g) for g in self.members)

    @property
    def n_groups(self) -> int:
        return len(self.members)

    @property
    def sizes(self) -> list[int]:
        return [len(g) for g in self.members]

    @functools.cached_property
    def _group_index(self) -> dict[int, int]:
        return {a: j for j, g in enumerate(self.members) for a in g}

    def group_of(self, agent: int) -> int:
        try:
            return self._group_index[agent]
        except (KeyError, TypeError):
            raise TopologyError(f"agent {agent} is in no group (agents 0..{self.n - 1})") from None

    def mates(self, agent: int) -> list[int]:
        """The other members of ``agent``'s group (whom it reads in an intra-group round)."""
        return [a for a in self.members[self.group_of(agent)] if a != agent]

    def intra_peers(self) -> dict[int, list[int]]:
        """Who reads whom in an intra-group round: every agent reads its group mates."""
        return {i: self.mates(i) for i in range(self.n)}

    def describe(self) -> dict[str, Any]:
        return {"kind": "groups", "sizes": self.sizes, "members": [list(g) for g in self.members]}


def make_groups(spec: Any, n: int, seed: int = 0, shuffle: bool = True) -> Groups:
    """Split ``n`` agents into groups of the sizes :func:`parse_group_sizes` gives.

    ``shuffle`` (the papers' Alg. 1 line 1): agents are shuffled with ``random.Random`` seeded
    by ``("groups", seed)``, then cut into consecutive groups; each group is sorted. The same
    ``seed`` always gives the same groups. ``shuffle=False`` gives ``[0, 1], [2, 3], ...``.
    """
    sizes = parse_group_sizes(spec, n)
    order = list(range(n))
    if shuffle:
        if isinstance(seed, bool):
            raise TopologyError(f"--seed {seed!r} must be an integer")
        try:
            seed = operator.index(seed)
        except TypeError:
            raise TopologyError(f"--seed {seed!r} must be an integer") from None
        random.Random(f"groups:{seed}").shuffle(order)
    members, start = [], 0
    for size in sizes:
        members.append(tuple(sorted(order[start : start + size])))
        start += size
    return Groups(tuple(members))


# ---------------------------------------------------------------------------
# stage schedule
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RoundPlan:
    """What happens in 0-based round ``round``: ``kind`` is "first", "intra" or "inter";
    ``stage`` is 0-based; ``summarize_after`` says whether group summaries follow it."""

    round: int
    stage: int
    kind: str
    summarize_after: bool


def _check_tr(rounds: int, stage_rounds: int) -> tuple[int, int]:
    for value, flag in ((rounds, "--rounds"), (stage_rounds, "--stage-rounds")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise TopologyError(f"{flag} {value!r}: must be an integer >= 1")
    return rounds, stage_rounds


def n_stages(rounds: int, stage_rounds: int) -> int:
    """``S = ceil(T / R)``."""
    t, r = _check_tr(rounds, stage_rounds)
    return math.ceil(t / r)


def summary_after(round_: int, rounds: int, stage_rounds: int) -> bool:
    """Group summaries follow round ``round_`` (0-based) when it ends a stage that is not the last."""
    t, r = _check_tr(rounds, stage_rounds)
    return (round_ + 1) % r == 0 and round_ + 1 < t


def stage_plan(rounds: int, stage_rounds: int) -> list[RoundPlan]:
    """The schedule of a GroupDebate / S2-MAD run (GD sec. 3.1 (1)-(3), Alg. 1 lines 8-36)."""
    t, r = _check_tr(rounds, stage_rounds)
    plan = []
    for k in range(t):
        kind = "first" if k == 0 else ("inter" if k % r == 0 else "intra")
        plan.append(RoundPlan(k, k // r, kind, summary_after(k, t, r)))
    return plan


# ---------------------------------------------------------------------------
# S2-MAD Decision-Making Mechanism (sec. 3.2, Alg. 1 lines 17-31, 46-47)
# ---------------------------------------------------------------------------

Matrix = np.ndarray | Sequence[Sequence[bool]]  # [i][j]: views i and j are similar


def similar_by_answer(answers: Sequence[str | None]) -> np.ndarray:
    """Similarity Calculation Module, regular-expression variant: two views are similar when
    their extracted (canonical) answers are equal. An unparseable answer (``None``) is similar
    to nothing, not even to another ``None``, so an agent without an answer always debates
    (our choice: the paper does not say; treating "no answer" as agreement would silence the
    agents that most need the debate). The diagonal is True. A boolean ``n x n`` array."""
    codes: dict[str, int] = {}
    keys = np.array(
        [-1 - i if a is None else codes.setdefault(a, len(codes)) for i, a in enumerate(answers)], dtype=np.int64
    )
    return keys[:, None] == keys[None, :]


def similar_by_cosine(cos: Sequence[Sequence[float]] | np.ndarray, tau: float) -> np.ndarray:
    """Embedding variant (sec. 3.2 / 4.3): similar when cosine similarity ``>= tau``
    (eq. 1's ``Sim(.,.) < eps`` counts a view as *different*; ``eps`` is ``--tau``).
    The diagonal is True. A boolean ``n x n`` array."""
    n = len(cos)
    if not isinstance(cos, np.ndarray):
        for row in cos:
            if len(row) != n:
                raise TopologyError(f"similarity matrix must be square, got a row of {len(row)} in a {n} x {n} matrix")
    m = np.asarray(cos, dtype=float).reshape(n, -1) if n else np.zeros((0, 0))
    if m.shape != (n, n):
        raise TopologyError(f"similarity matrix must be square, got a row of {m.shape[1]} in a {n} x {n} matrix")
    return (m >= tau) | np.eye(n, dtype=bool)


def differing(own: int, candidates: Sequence[int], similar: Matrix) -> list[int]:
    """Candidates whose view differs from ``own``'s (Opinion Judger ``J``, Alg. 1 lines 20, 26).

    ``len(differing(...))`` is eq. 1's ``D_i``: the number of group mates (intra-group round) or
    group summaries (inter-group round) that are not similar to the agent's latest view."""
    cand = np.asarray(candidates, dtype=np.int64)
    if not len(cand):
        return []
    row = np.asarray(similar[own], dtype=bool)
    return cand[(cand != own) & ~row[cand]].tolist()


def dedup(candidates: Sequence[int], similar: Matrix) -> list[int]:
    """``F`` (Alg. 1 line 46): among mutually similar views keep one — the first in the given
    order; a view is dropped when it is similar to one already kept (either way round)."""
    cand = list(candidates)
    if not cand:
        return []
    idx = np.asarray(cand, dtype=np.int64)
    sub = np.asarray(similar, dtype=bool)[np.ix_(idx, idx)]
    near = sub | sub.T  # near[p, q]: candidates p and q are similar one way or the other
    blocked = np.zeros(len(cand), dtype=bool)
    kept: list[int] = []
    for p, c in enumerate(cand):
        if not blocked[p]:
            kept.append(c)
            blocked |= near[p]
    return kept


def redundancy_filter(own: int, candidates: Sequence[int], similar: Matrix) -> list[int]:
    """Redundancy Filtering Module (sec. 3.2): "Outputs that are identified as similar to
    either their own or previously received viewpoints are promptly discarded" — the views an
    agent receives differ from its own and from each other (the first of each similar set is
    kept, in the given order)."""
    return dedup(differing(own, candidates, similar), similar)


def participates(d: int) -> bool:
    """Conditional Participation Module, eq. 2: ``P_i^t = 1`` if ``D_i^t > 0`` else 0."""
    if d < 0:
        raise ValueError(f"D_i must be >= 0, got {d}")
    return d > 0


def all_similar(candidates: Sequence[int], similar: Matrix) -> bool:
    """Early-stop test (Alg. 1 lines 46-47: ``Sum <- F(Sum)``; stop ``if len(Sum) = 1``):
    true when the redundancy filter leaves exactly one of ``candidates``."""
    return len(candidates) > 0 and len(dedup(candidates, similar)) == 1
