"""Which model each agent runs: strong/weak model placement by centrality.

Paper: "Improving Multi-Agent Debate with Sparse Communication Topology", sec. 6 ("MAD with
Multiple LLMs", Figure 5, Table 6, Figure 6). With agents instantiated by different LLMs the
permutation symmetry of a regular graph is broken, and "assigning stronger LLMs to agents with
higher centrality yields better performance": 6 agents, one GPT-3.5 (strong) and five Mistral 7B
(weak); the strong model on a node of degree 5 gave 67.0 % on Harmlessness vs 65.8 % on a node
of degree 1 (Table 6).

The run option is ``--strong-agents none|central|peripheral`` (YAML ``strong_agents``; its old
name ``--placement`` still works). It is not ``placement_resources`` nor the runs table's
``placement`` column, which are about where model replicas run on the Ray cluster.

The pieces:

* :func:`parse_models` reads the ``--models`` flag, ``"big*1,small*5"`` (or one name per agent,
  ``"big,small,small"``), listed STRONGEST FIRST, into one model name per rank.
* :func:`assign_models` maps ranks to agent ids (``placement``: the ``--strong-agents`` value):
  ``placement="central"`` gives the r-th strongest
  model to the r-th most central agent (:func:`topologies.centrality_order`, degree centrality,
  ties broken by betweenness, then lower agent id); ``"peripheral"`` the reverse (strongest on
  the least central); ``"none"`` gives agent i the i-th model of the list.
* :func:`paper_placement_graph` is the sec. 6 graph (see its docstring for what the paper does
  and does not pin down).

Regular graphs (ring, K6, every ``--density`` regular graph) and ProbMAD have all agents tied in
centrality, so there "central" and "peripheral" both give exactly the "none" assignment: the
placement question only exists on a non-regular graph, which is why the paper's sec. 6
experiment uses one (strong model at degree 5 vs degree 1).
"""

from __future__ import annotations

import operator
from typing import Any

from .base import Topology, TopologyError
from .factory import centrality_classes
from .static import StaticTopology, star

__all__ = ["PLACEMENTS", "parse_models", "assign_models", "placement_order", "paper_placement_graph"]

PLACEMENTS = ("none", "central", "peripheral")


# ---------------------------------------------------------------------------
# --models
# ---------------------------------------------------------------------------


def parse_models(spec: str, n_agents: int) -> list[str]:
    """Parse ``--models`` into one model name per rank, strongest first.

    Syntax: comma-separated items, each ``name`` (one agent) or ``name*count`` (``count`` agents,
    a positive integer); blanks around names, ``*`` and commas are ignored, and both forms may be
    mixed: ``"gpt*1, mistral*5"``, ``"a,b,b,b"``, ``"a*2,b"``. The list is ordered strongest
    first; the same name may appear more than once. The total must equal ``n_agents``.

    Raises :class:`TopologyError` (a ValueError) naming ``--models`` (and ``--agents`` for a
    count mismatch), e.g. ``"--models lists 5 agents but --agents is 6"``.
    """
    if isinstance(n_agents, bool):
        raise TopologyError(f"--agents {n_agents!r}: the number of agents must be an integer >= 1")
    try:
        n = operator.index(n_agents)
    except TypeError:
        raise TopologyError(f"--agents {n_agents!r}: the number of agents must be an integer >= 1") from None
    if not isinstance(spec, str) or not spec.strip():
        raise TopologyError(
            f"--models {spec!r}: expected model names strongest first, e.g. 'big*1,small*5' or 'big,small,small'"
        )
    ranked: list[str] = []
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            raise TopologyError(f"--models {spec!r}: empty item between commas")
        if "*" in item:
            name, count_text = (part.strip() for part in item.rsplit("*", 1))
            try:
                count = int(count_text)
            except ValueError:
                raise TopologyError(
                    f"--models item {item!r}: the count after '*' must be a positive integer (got {count_text!r})"
                ) from None
            if count < 1:
                raise TopologyError(
                    f"--models item {item!r}: the count after '*' must be a positive integer (got {count})"
                )
        else:
            name, count = item, 1
        if not name:
            raise TopologyError(f"--models item {item!r}: missing model name before '*'")
        ranked.extend([name] * count)
    if len(ranked) != n:
        raise TopologyError(
            f"--models lists {len(ranked)} agent{'s' if len(ranked) != 1 else ''} but --agents is {n}; "
            "the counts must add up to the number of agents"
        )
    return ranked


# ---------------------------------------------------------------------------
# placement
# ---------------------------------------------------------------------------


def placement_order(topology: Topology, placement: str) -> list[int]:
    """Agent ids in the order in which they receive the ranked models (strongest first).

    * ``"none"``: ``0 .. n-1``;
    * ``"central"``: :func:`topologies.centrality_order` (degree centrality; ties broken by
      betweenness, then lower agent id);
    * ``"peripheral"``: least central first. Agents tied in centrality keep ascending id order
      (the same tie rule as "central"), so an all-tied topology gives ``0 .. n-1`` in all three
      modes. Only the order of the *tie classes* is reversed: on a star with centre 0 the order
      is ``1, 2, ..., n-1, 0``.
    """
    if placement not in PLACEMENTS:
        raise TopologyError(f"--strong-agents {placement!r}: choose one of {', '.join(PLACEMENTS)}")
    if not isinstance(topology, Topology):
        raise TopologyError(f"placement needs a Topology, got {type(topology).__name__}")
    n = topology.n
    if placement == "none":
        return list(range(n))
    classes = centrality_classes(topology, "degree")
    if placement == "peripheral":
        classes = classes[::-1]
    return [v for cls in classes for v in cls]


def assign_models(ranked_models: list[str], topology: Topology, placement: str, key: int = 0) -> list[str]:
    """Model of each agent id: the r-th strongest model goes to the r-th agent of
    :func:`placement_order`.

    ``ranked_models`` is strongest first (as :func:`parse_models` returns it) and must have one
    entry per agent. ``key`` (the per-question seed of :meth:`Topology.peers`) is accepted for
    symmetry with the topology API and must be an integer; it does not change the result,
    because centrality is measured on ``topology.centrality_graph()``, which is the fixed graph
    of a static topology and the expected (all-tied) graph of ProbMAD. A model is chosen once per
    run, not per question.

    On a topology whose agents all tie in centrality (regular graphs, ProbMAD) "central" and
    "peripheral" return the same list as "none". The paper's sec. 6 experiment is run on a
    non-regular graph (the strong model on a node of degree 5 vs degree 1); see
    :func:`paper_placement_graph`.
    """
    if isinstance(key, bool) or not isinstance(key, int):
        raise TopologyError(f"key must be an integer, got {key!r}")
    models = list(ranked_models)
    if not isinstance(topology, Topology):
        raise TopologyError(f"placement needs a Topology, got {type(topology).__name__}")
    if len(models) != topology.n:
        raise TopologyError(
            f"--models lists {len(models)} agent{'s' if len(models) != 1 else ''} but --agents is {topology.n}"
        )
    order = placement_order(topology, placement)
    out: list[Any] = [None] * topology.n
    for rank, agent in enumerate(order):
        out[agent] = models[rank]
    return out


def paper_placement_graph(n: int = 6) -> StaticTopology:
    """The communication graph of the paper's sec. 6 experiment (Figure 5), as far as the text
    pins it down — a documented stand-in, not a recovered figure.

    What the paper says: 6 agents on one ("isotropic") topology; the stronger LLM is placed on a
    node of degree 5 (high centrality) or of degree 1 (low centrality); with degree 1 the
    strong agent's information "is transmitted to the central weaker agent in the first debate
    round (round 2), which then shares it with other weaker agents in the next round (round 3)".
    So the graph has a node adjacent to everybody (degree 5) and a node of degree 1 whose only
    neighbour is that hub. Figure 5 itself is not in the text, so the edges among the other four
    agents cannot be recovered.

    Our choice: the star K_{1,n-1} with centre 0 (hub degree n-1 = 5, every other agent degree
    1), the minimal graph with both properties; it reproduces the paper's information-flow
    account exactly (hub -> everyone in one round; leaf -> hub -> other leaves in two). With
    ``placement="central"`` the strongest model sits on agent 0 (degree 5); with
    ``"peripheral"`` on agent 1 (degree 1). Its density is ``2/n`` (1/3 for n = 6).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise TopologyError(f"--agents {n!r}: the sec. 6 placement graph needs at least 2 agents")
    topo = star(n, 0)  # node 0 joined to 1..n-1
    topo.name = f"sec6-star(n={n})"
    return topo
