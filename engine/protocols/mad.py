"""CoT, CoT-SC, fully connected MAD (Du et al. 2023), sparse MAD and ProbMAD (Li et al. 2024).

All five are one loop: round 0, every agent answers the question; in each later round t every
agent reads the round t-1 replies of the peers the topology gives it (all peers for MAD, its
neighbours for a sparse graph, a fresh random draw for ProbMAD) — *simultaneous talk* — and
revises. An agent that reads nobody in a round gets the self-check prompt. The answer is the
majority vote of the last round. CoT is one agent and one round; CoT-SC(k) is k agents and one
round (k independent samples, then the vote).

``--forgetting`` keeps only the first prompt and the agent's previous reply in its context.
"""

from __future__ import annotations

from engine.options import ConfigError, Option
from engine.protocols.base import AgentCall, Context, Outcome, ProtocolGen, Step, vote
from engine.protocols.shared import FORGETTING
from engine.protocols.spec import ProtocolSpec
from topologies import Topology, make_topology


def build_topology(ctx_cfg) -> Topology:
    cfg = ctx_cfg
    n = cfg.n_agents
    if cfg.protocol in ("cot", "sc", "mad"):
        return make_topology("full", n)
    if cfg.protocol == "probmad":
        return make_topology("probmad", n, density=cfg.density, seed=cfg.seed)
    kind = cfg.topology or ("edges" if cfg.edges else "regular")
    return make_topology(kind, n, density=cfg.density, edges=cfg.edges, center=cfg.center, seed=cfg.seed)


def validate(cfg) -> None:
    """Raise TopologyError naming --density/--agents/--edges before a run starts."""
    build_topology(cfg)


def topology_debate(ctx: Context, topology: Topology | None = None) -> ProtocolGen:
    topo = topology or build_topology(ctx.cfg)
    n, memory = ctx.n_agents, ("last" if ctx.cfg.forgetting else "full")
    replies = yield Step(0, [AgentCall(agent=i, stage="first", memory=memory) for i in range(n)])
    texts = [r.text for r in replies]
    answers = [r.answer for r in replies]
    history = [answers]
    for t in range(1, ctx.n_rounds):
        reads = topo.peers(t, ctx.key)
        calls = []
        for i in range(n):
            p = [j for j in reads.get(i, []) if j != i]
            calls.append(
                AgentCall(
                    agent=i,
                    stage="debate" if p else "self_check",
                    peers=p,
                    peer_texts=[(j, texts[j]) for j in p],
                    peer_answers=[answers[j] for j in p],
                    memory=memory,
                )
            )
        replies = yield Step(t, calls)
        texts = [r.text for r in replies]
        answers = [r.answer for r in replies]
        history.append(answers)
    return Outcome(final_answer=vote(ctx, answers), answers_by_round=history)


# --------------------------------------------------------------------------- specs
def _cost(protocol: str):
    """The closed-form cost of one of the five (engine.cost_model.topology_cost)."""

    def cost(s, n: int, rounds: int, q: float, c: float, *, density: float | None = None, forgetting: bool = False,
             **_: object):
        from engine.cost_model import topology_cost

        if protocol == "cot":
            return topology_cost(s, 1, 1, q, c, 0)
        if protocol == "sc":
            return topology_cost(s, n, 1, q, c, 0)
        if protocol == "mad":
            return topology_cost(s, n, rounds, q, c, n - 1, forgetting=forgetting)
        if density is None:
            raise ValueError(f"{protocol} needs density")
        k = density * (n - 1)
        if protocol == "sparse":
            return topology_cost(s, n, rounds, q, c, k, 1.0 if k == 0 else 0.0, forgetting)
        return topology_cost(s, n, rounds, q, c, k, (1 - density) ** (n - 1), forgetting)  # probmad

    return cost


TOPOLOGY_KINDS = ("regular", "ring", "star", "edges", "full")
DENSITY = Option("density", float, None, "density D = 2|E|/(N(N-1)) of the regular graph (sparse) or the "
                 "probability of reading each peer (probmad)", low=0.0, high=1.0)
TOPOLOGY = Option("topology", str, None, "regular (needs --density), ring, star, edges (needs --edges), full",
                  choices=TOPOLOGY_KINDS)
EDGES = Option("edges", str, None, "edge list for --topology edges, e.g. '0-1,1-2' (undirected) or '0->1' (1 reads 0)")
CENTER = Option("center", int, 0, "the hub of --topology star", low=0)


def _check_density(cfg) -> None:
    """--density / --edges given where the protocol needs them (RunConfig.validate)."""
    if cfg.protocol == "probmad" and cfg.density is None:
        raise ConfigError("--density is required with --protocol probmad (probability of seeing each peer)")
    if cfg.protocol == "sparse":
        kind = cfg.topology or ("edges" if cfg.edges else "regular")
        if kind == "regular" and cfg.density is None:
            raise ConfigError("--density is required with --protocol sparse and a regular topology")
        if kind == "edges" and not cfg.edges:
            raise ConfigError("--edges is required with --topology edges (e.g. '0-1,1-2,2-0')")


def _sparse_unused(cfg) -> set[str]:
    kind = cfg.topology or ("edges" if cfg.edges else "regular")
    return set() if kind == "star" else {"center"}


def _graph_label(cfg) -> list[str]:
    from engine.report import fmt_num

    parts = []
    if cfg.get("topology") and cfg["topology"] != "regular":
        parts.append(cfg["topology"])
    if cfg.get("density") is not None:
        parts.append(f"D={fmt_num(cfg['density'])}")
    return parts


SPECS = (
    ProtocolSpec("cot", topology_debate, "CoT: one agent, one round", "CoT", shape=lambda cfg: (1, 1),
                 validate=validate, topology=build_topology, cost=_cost("cot")),
    ProtocolSpec("sc", topology_debate, "CoT-SC(k): k = --agents independent samples, one round, vote", "CoT-SC",
                 shape=lambda cfg: (cfg.agents, 1), validate=validate, topology=build_topology, cost=_cost("sc")),
    ProtocolSpec("mad", topology_debate, "fully connected MAD (Du et al. 2023)", "MAD",
                 settings=(FORGETTING,), validate=validate, topology=build_topology, cost=_cost("mad")),
    ProtocolSpec("sparse", topology_debate, "sparse MAD on a regular graph of --density, or --topology (Li et al. 2024)",
                 "sparse MAD", settings=(DENSITY, TOPOLOGY, EDGES, CENTER, FORGETTING),
                 unused=_sparse_unused, check=_check_density, validate=validate, topology=build_topology,
                 cost=_cost("sparse"),
                 label_parts=_graph_label),
    ProtocolSpec("probmad", topology_debate, "ProbMAD: each peer read with probability --density, redrawn "
                 "(Li et al. 2024, app. E)", "ProbMAD", settings=(DENSITY, FORGETTING),
                 check=_check_density, validate=validate, topology=build_topology, cost=_cost("probmad"),
                 label_parts=_graph_label),
)
