"""Communication topologies for multi-agent debate (MAD).

N agents answer independently in round 0; in each round ``t >= 1`` every agent
reads some peers' round ``t-1`` replies and revises.  A :class:`Topology` says
who reads whom::

    from topologies import make_topology
    topo = make_topology("regular", 6, density=0.4)   # the 6-ring
    topo.peers(1)          # {0: [1, 5], 1: [0, 2], ...}
    topo.graph(1)          # nx.DiGraph, edge src -> dst when dst reads src

Density follows "Improving Multi-Agent Debate with Sparse Communication
Topology" (sec. 3.1): ``D = 2|E| / (N(N-1))`` -- 1 for the fully connected
debate, ``2/(N-1)`` for the neighbour ring, ``k/(N-1)`` for a k-regular graph.
:class:`ProbMAD` (appendix E) instead lets each agent read each other agent
with probability ``D``, redrawn each round.
"""

from .base import Topology, TopologyError, fmt_ratio
from .factory import CENTRALITY_MEASURES, KINDS, centrality_order, make_topology
from .probmad import ProbMAD
from .static import (
    StaticTopology,
    check_degree,
    from_edges,
    fully_connected,
    nearest_regular_degree,
    parse_edges,
    possible_regular_densities,
    regular,
    regular_degree,
    ring,
    star,
)

__all__ = [
    "Topology",
    "TopologyError",
    "StaticTopology",
    "ProbMAD",
    "fully_connected",
    "regular",
    "regular_degree",
    "nearest_regular_degree",
    "check_degree",
    "fmt_ratio",
    "possible_regular_densities",
    "ring",
    "star",
    "from_edges",
    "parse_edges",
    "make_topology",
    "centrality_order",
    "KINDS",
    "CENTRALITY_MEASURES",
]

# strong/weak model placement (paper sec. 6)
from .placement import assign_models, paper_placement_graph, parse_models, placement_order  # noqa: E402

__all__ += ["assign_models", "paper_placement_graph", "parse_models", "placement_order"]

# CortexDebate: MDM edge weights and the per-round pruned graph (eqs. 1-12)
from .cortex import CortexRound, MDMState, credibility, debate_peers, prune, weight_matrix  # noqa: E402

__all__ += ["MDMState", "CortexRound", "credibility", "debate_peers", "prune", "weight_matrix"]

# GroupDebate / S2-MAD groups and S2-MAD's decision-making mechanism
from .groups import (  # noqa: E402
    Groups,
    RoundPlan,
    all_similar,
    dedup,
    default_group_sizes,
    differing,
    make_groups,
    n_stages,
    parse_group_sizes,
    participates,
    redundancy_filter,
    similar_by_answer,
    similar_by_cosine,
    stage_plan,
    summary_after,
)

__all__ += [
    "Groups",
    "RoundPlan",
    "all_similar",
    "dedup",
    "default_group_sizes",
    "differing",
    "make_groups",
    "n_stages",
    "parse_group_sizes",
    "participates",
    "redundancy_filter",
    "similar_by_answer",
    "similar_by_cosine",
    "stage_plan",
    "summary_after",
]
