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

from engine.protocols.base import AgentCall, Context, Outcome, ProtocolGen, Step, vote
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
