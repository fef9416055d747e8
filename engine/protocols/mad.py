"""CoT, CoT-SC, fully connected MAD (Du et al. 2023), sparse MAD and ProbMAD (Li et al. 2024).

All five are one loop: round 0, every agent answers the question; in each later round t every
agent reads the round t-1 replies of the peers the topology gives it (all peers for MAD, its
neighbours for a sparse graph, a fresh random draw for ProbMAD) — *simultaneous talk* — and
revises. An agent that reads nobody in a round gets the self-check prompt. The answer is the
majority vote of the last round. CoT is one agent and one round; CoT-SC(k) is k agents and one
round (k independent samples, then the vote).

``--memory`` (:mod:`engine.protocols.shared`): ``full`` (default) keeps the agent's whole
transcript; ``last`` (``--forgetting``) only the first prompt and its previous reply;
``summary`` and ``summary-last`` are Du et al.'s summarisation, as the GroupDebate paper
implements its MAD baseline (sec. 3.3, appendix B.1, Alg. 2): after round t-1, for every agent
that reads peers, one LLM call summarises the replies of the peers it reads (without its own:
Alg. 2's ``Summary_i`` is "the summary of the output without A_i"), and in round t the agent sees
that summary instead of the replies. Our choices where the papers are vague: the summary prompt
is GroupDebate's (Table 3, "Summary"; its MAD baseline is the one these numbers compare with),
served by the agent's own model, with no system prompt and no memory, like GroupDebate's group
summaries; the debate prompt is our ``debate`` prompt with the summary in place of the replies.
``summary-last`` keeps, like ``last``, only the first prompt and the previous reply
(GroupDebate's "MAD+Forget").

``--prompt-layout shared`` (MAD only, simultaneous talk; :mod:`engine.protocols.layout`): later
rounds show every agent the same boards of all answers, then its own part (:func:`shared_debate`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from engine.cost_model import (
    Cost,
    NotCovered,
    Sizes,
    first_call,
    first_computed,
    header,
    replies_cached,
    summary_computed,
    summary_head,
    turn_computed,
)
from engine.formatting import fmt_num
from engine.options import MAX_AGENTS, ConfigError, Option, parse_number
from engine.protocols.base import AgentCall, Board, Context, Outcome, ProtocolGen, Reply, Step, SummaryCall, vote
from engine.protocols.group_debate import GD_STAGES
from engine.protocols.layout import (
    PROMPT_LAYOUT,
    SUMMARY_LABEL,
    BoardKey,
    Readers,
    agent_label,
    answer_board,
    board_summary_call,
    board_tokens,
    is_shared,
    keep,
    layout_label,
    shared_computed,
    shared_prompt,
    summary_board,
    who,
)
from engine.protocols.shared import FORGETTING, MEMORY, TALK, check_memory, memory_mode, resolve_memory
from engine.protocols.spec import ProtocolSpec
from topologies import (
    Topology,
    TopologyError,
    check_degree,
    fmt_ratio,
    make_topology,
    nearest_regular_degree,
    regular_degree,
)

log = logging.getLogger(__name__)


def build_topology(ctx_cfg) -> Topology:
    """The run's graph (the same object for every question of a run: topologies are immutable)."""
    cfg = ctx_cfg
    n = cfg.n_agents
    if cfg.experiment.protocol in ("cot", "sc", "mad"):
        return _topology("full", n)
    if cfg.experiment.protocol == "probmad":
        return _topology("probmad", n, cfg.option(DENSITY), seed=cfg.experiment.seed)
    return _topology(
        _graph_kind(cfg), n, cfg.option(DENSITY), cfg.option(EDGES), cfg.option(CENTER), cfg.experiment.seed
    )


@functools.lru_cache(maxsize=8)
def _topology(
    kind: str, n: int, density: float | None = None, edges: str | None = None, center: int = 0, seed: int = 0
) -> Topology:
    return make_topology(kind, n, density=density, edges=edges, center=center, seed=seed)


def validate(cfg) -> None:
    """Raise TopologyError naming --density/--agents/--edges before a run starts."""
    build_topology(cfg)


SUMMARY_STAGES = {
    "mad_summary": GD_STAGES["gd_summary"],
    "mad_summary_debate": (
        "This is a summary of the solutions to the problem from other agents:\n```$summary```\n"
        "Using the reasoning from other agents as additional information, can you provide an updated answer? "
        "The original problem is: $question\nExplain your reasoning. $format"
    ),
}


def _turn(
    i: int, peers: list[int], texts: list[str], answers: list[str | None], summary: Reply | None, memory: str
) -> AgentCall:
    """Agent i's call in a debate round: the replies of ``peers`` (or their summary), else a
    self-check when it reads nobody."""
    if summary is not None:
        return AgentCall(
            agent=i,
            stage="mad_summary_debate",
            peers=peers,
            values={"summary": summary.shown_text},
            peer_answers=[summary.answer],
            memory=memory,
            summaries=[i],  # _summaries: reader i's summary is SummaryCall group i
        )
    return AgentCall(
        agent=i,
        stage="debate" if peers else "self_check",
        peers=peers,
        peer_texts=list(zip(peers, map(texts.__getitem__, peers))),
        peer_answers=list(map(answers.__getitem__, peers)),
        memory=memory,
    )


def _summaries(t: int, readers: list[int], peers: list[list[int]], texts: list[str], answers: list[str | None]):
    """One summary call per reader of the replies it reads (Alg. 2 line 3); yields them as one step."""
    if not readers:
        return {}
    sreplies = yield Step(
        t,
        [
            SummaryCall(
                group=i,
                texts=[texts[j] for j in peers[i]],
                agent=i,
                answers=[answers[j] for j in peers[i]],
                sources=peers[i],
                stage="mad_summary",
            )
            for i in readers
        ],
    )
    return dict(zip(readers, sreplies))


def topology_debate(ctx: Context, topology: Topology | None = None) -> ProtocolGen:
    """Round 0: every agent answers. Round t: every agent reads the latest replies of the peers the
    topology gives it (or their summary, ``--memory summary``) and revises; ``--talk one-by-one``
    has the agents speak in id order within the round, each reading what its peers said last,
    this round's replies for the peers that already spoke."""
    n, mode = ctx.n_agents, memory_mode(ctx.cfg, "full") if ctx.n_rounds > 1 else "full"
    if is_shared(ctx.cfg):
        return (yield from shared_debate(ctx, mode))
    topo = topology or build_topology(ctx.cfg)
    memory = "last" if mode in ("last", "summary-last") else "full"
    summarise = mode.startswith("summary")
    one_by_one = ctx.n_rounds > 1 and ctx.cfg.option(TALK) == "one-by-one"
    replies = yield Step(0, [AgentCall(agent=i, stage="first", memory=memory) for i in range(n)])
    texts = [r.text for r in replies]
    answers = [r.answer for r in replies]
    history = [answers]
    for t in range(1, ctx.n_rounds):
        reads = topo.peers(t, ctx.key)  # never lists an agent as its own peer
        peers = [reads.get(i, []) for i in range(n)]
        if not one_by_one:  # simultaneous talk: everyone reads round t-1
            readers = [i for i in range(n) if peers[i]] if summarise else []
            summaries = yield from _summaries(t - 1, readers, peers, texts, answers)
            replies = yield Step(t, [_turn(i, peers[i], texts, answers, summaries.get(i), memory) for i in range(n)])
            texts = [r.text for r in replies]
            answers = [r.answer for r in replies]
        else:  # one by one: agent i reads the replies given so far (round t for j < i, else t-1)
            texts, answers = list(texts), list(answers)
            for i in range(n):
                readers = [i] if summarise and peers[i] else []
                summaries = yield from _summaries(t, readers, peers, texts, answers)
                (reply,) = yield Step(t, [_turn(i, peers[i], texts, answers, summaries.get(i), memory)])
                texts[i], answers[i] = reply.text, reply.answer
        history.append(list(answers))
    return Outcome(final_answer=vote(ctx, answers), answers_by_round=history)


def models_of(cfg, n: int) -> list[list[int]]:
    """The agents of each distinct model, in the order the models first appear (agent order)."""
    by_model: dict[str, list[int]] = {}
    for i, spec in enumerate(cfg.agent_specs()[:n]):
        by_model.setdefault(spec.model, []).append(i)
    return list(by_model.values())


def shared_debate(ctx: Context, mode: str) -> ProtocolGen:
    """MAD (simultaneous talk) under ``--prompt-layout shared`` (:mod:`engine.protocols.layout`).

    Round t: every agent is shown the board of round t-1's replies, all N in agent order, its own
    included, after the boards its memory keeps (``full``: every earlier board; ``last``: none).
    ``--memory summary`` / ``summary-last``: after round t-1, ONE summary call of that board per
    distinct model among the agents (:func:`models_of`; served by the model's lowest-id agent,
    recorded as summary group k for the k-th model), and each agent is shown its model's summary
    as a board instead of the replies. A lone agent (N = 1) is shown its own reply (kind
    ``self_check``, no summary)."""
    n = ctx.n_agents
    summarise = mode.startswith("summary") and n > 1
    replies = yield Step(0, [AgentCall(agent=i, stage="first") for i in range(n)])
    texts = [r.text for r in replies]
    answers = [r.answer for r in replies]
    history = [answers]
    readers = models_of(ctx.cfg, n) if summarise else [list(range(n))]
    kept: list[tuple[Board, ...]] = [() for _ in readers]
    everyone = list(range(n))
    for t in range(1, ctx.n_rounds):
        board = answer_board(t - 1, everyone, texts)
        shown: list[Reply | None] = [None] * len(readers)
        new = [board]
        if summarise:
            summaries: list[Reply] = yield Step(
                t - 1,
                [
                    SummaryCall(k, list(texts), m[0], list(answers), everyone, "mad_summary", board=board)
                    for k, m in enumerate(readers)
                ],
            )
            shown = list(summaries)
            new = [summary_board(t - 1, [(SUMMARY_LABEL, r.shown_text)]) for r in summaries]
        kept = [keep(old, b, mode) for old, b in zip(kept, new)]
        turns = [_shared_turn(i, k, n, answers, kept[k], shown[k]) for k, m in enumerate(readers) for i in m]
        replies = yield Step(t, sorted(turns, key=lambda c: c.agent))
        texts = [r.text for r in replies]
        answers = [r.answer for r in replies]
        history.append(list(answers))
    return Outcome(final_answer=vote(ctx, answers), answers_by_round=history)


def _shared_turn(
    i: int, k: int, n: int, answers: list[str | None], boards: tuple[Board, ...], summary: Reply | None
) -> AgentCall:
    """Agent i's shared-layout turn reading ``boards`` (of reader set k: its model's summaries)."""
    peers = [j for j in range(n) if j != i]
    if summary is not None:
        return AgentCall(
            agent=i,
            stage="mad_summary_debate",
            peers=peers,
            values=who(i),
            peer_answers=[summary.answer],
            summaries=[k],
            boards=boards,
        )
    return AgentCall(
        agent=i,
        stage="debate" if peers else "self_check",
        peers=peers,
        values=who(i),
        peer_answers=[answers[j] for j in peers],
        boards=boards,
    )


# --------------------------------------------------------------------------- cost model
# closed forms described in engine.cost_model's docstring


def _agent_prompts(
    s: Sizes, q: float, c: float, rounds: int, debate_msg: Callable[[int], float], forgetting: bool
) -> float:
    """Sum of one agent's prompt tokens over all rounds. ``debate_msg(t)`` = f + content of round t's message."""
    base = s.g + s.f + s.a1 + q + ((s.f + s.system) if s.system else 0)
    total = base  # round 0
    history = 0.0
    for t in range(1, rounds):
        msg = debate_msg(t)
        if forgetting:
            total += base + (s.f + c) + msg
        else:
            total += base + t * (s.f + c) + history + msg
            history += msg
    return total


def topology_cost(
    s: Sizes,
    n_agents: int,
    rounds: int,
    question_tokens: float,
    reply_tokens: float,
    peers_per_round: float,
    self_check_prob: float = 0.0,
    forgetting: bool = False,
    memory: str | None = None,
    n_models: int = 1,
    fully_connected: bool = False,
) -> Cost:
    """MAD / sparse / ProbMAD / CoT / CoT-SC: each debate round every agent reads ``peers_per_round``
    replies on average (0 -> self-check); a fraction ``self_check_prob`` of debate turns self-check.

    ``memory`` (``--memory``; default "last" with ``forgetting``, else "full"): with "summary" /
    "summary-last" every debate turn that reads peers is preceded by one summary call of what it
    reads (``g + f + mad_summary(Q) + k (a3 + C)``, C completion tokens, no system prompt, no
    memory) and its message shows the summary (``f + mad_summary_debate(Q) + C``) instead of
    ``f + a2 + Q + k (a3 + C)``.

    Computed prefill (:mod:`engine.cost_model`): round 0 once per model (``n_models``), every later
    turn its message and, unless the cache holds it after the agent's previous prompt
    (:func:`~engine.cost_model.replies_cached`), its reply
    (:func:`~engine.cost_model.turn_computed`), every summary call all
    but its stage's lead; ``fully_connected`` (MAD): reader i's summary lists the replies of
    0..i-1 first, as reader i-1's does, so it shares their first i-1 (exact); otherwise no two
    lists are assumed to share a reply (an upper bound)."""
    q, c = question_tokens, reply_tokens
    mode = resolve_memory(memory, forgetting, "full")
    debate = s.f + s.a2 + q
    shown = peers_per_round * (s.a3 + c)  # the replies a debate message shows, per turn on average
    summary_calls = 0.0
    summary_prompt = 0.0
    if mode.startswith("summary") and rounds > 1:
        summ, sdebate = s.need("mad_summary", "mad_summary_debate")
        debate = s.f + sdebate.tokens(q) + sdebate.extra * c
        reading = n_agents * (rounds - 1) * (1 - self_check_prob)  # debate turns that read someone
        summary_calls = reading
        summary_prompt = reading * (s.g + s.f + summ.tokens(q)) + n_agents * (rounds - 1) * summ.views * shown
        shown = 0.0  # the summary calls read the replies; the message shows the summary instead
    check = s.f + s.a4 + q

    def msg(_t: int) -> float:
        return (1 - self_check_prob) * debate + self_check_prob * check + shown

    prompt = n_agents * _agent_prompts(s, q, c, rounds, msg, mode in ("last", "summary-last")) + summary_prompt
    calls = n_agents * rounds + summary_calls
    m = max(1, min(n_models, n_agents))
    later = n_agents * (rounds - 1) * turn_computed(s, c, msg(1))
    computed = m * first_computed(s, q) + later - c * replies_cached(n_agents, rounds - 1, mode in ("full", "summary"))
    kind = "exact"
    if summary_calls:
        (summ,) = s.need("mad_summary")
        lists = (n_agents - 1) * (n_agents - 2) / 2 * min(summ.views, 1) * (s.a3 + c) if fully_connected else 0
        computed += summary_prompt - summary_calls * (header(s) + summ.lead) - (rounds - 1) * lists
        kind = "estimate" if m > 1 else "exact" if fully_connected else "bound"
        return Cost(prompt, calls * c, calls, computed, kind, summary_head(s, summ))
    return Cost(prompt, calls * c, calls, computed)


def shared_cost(s: Sizes, n: int, rounds: int, q: float, c: float, memory: str = "full", n_models: int = 1) -> Cost:
    """MAD under ``--prompt-layout shared`` (:func:`shared_debate`), exact: round t's prompt is
    ``B + (kept boards) + turn`` (:func:`engine.protocols.layout.shared_prompt`), a board of the N
    replies is ``board_tokens(N)``; ``--memory summary``: per round, one summary call per model
    (``n_models``) of that board, and a board of one summary in place of the replies."""
    summarise = memory.startswith("summary") and n > 1
    calls = prompt = 0.0
    kept: list[float] = []
    m = min(n_models, n) if summarise else 0
    for t in range(rounds):
        if t:
            if summarise:
                (summ,) = s.need("mad_summary")
                prompt += m * board_summary_call(s, summ, q, c, n)
                board = board_tokens(s, q, c, 1, "summary")
            else:
                board = board_tokens(s, q, c, n)
            kept = kept + [board] if memory in ("full", "summary") else [board]
        prompt += n * shared_prompt(s, q, sum(kept)) if t else n * first_call(s, q)
        calls += n + (m if t else 0)
    computed = _shared_computed(s, n, rounds, q, c, memory, max(1, min(n_models, n)), summarise)
    head = summary_head(s, s.need("mad_summary")[0], board=True) if summarise and rounds > 1 else 0.0
    return Cost(prompt, calls * c, calls, computed, computed_per_run=head)


def _shared_computed(s: Sizes, n: int, rounds: int, q: float, c: float, memory: str, m: int, summarise: bool) -> float:
    """:func:`shared_cost`'s computed prefill: round 0 and, per later round, each model's first
    reader its new board and part, the others their part (:func:`~engine.protocols.layout.shared_computed`);
    each summary call all but its stage's lead. The ``m`` models' agents are split any way: only
    how many models there are matters."""
    counts = [n - m + 1] + [1] * (m - 1)
    kept: list[tuple[BoardKey, ...]] = [() for _ in counts]
    rounds_shown: list[list[Readers]] = []
    summaries = 0.0
    for t in range(1, rounds):
        if summarise:
            (summ,) = s.need("mad_summary")
            summaries += m * summary_computed(s, board_summary_call(s, summ, q, c, n), summ, board=True)
            new = [BoardKey("summary", t - 1, SUMMARY_LABEL, k, board_tokens(s, q, c, 1, "summary")) for k in range(m)]
        else:
            new = [BoardKey("agent", t - 1, agent_label(0), None, board_tokens(s, q, c, n))] * m
        kept = [keep(old, b, memory) for old, b in zip(kept, new)]
        rounds_shown.append([Readers(k, kept[k], count) for k, count in enumerate(counts)])
    return m * first_computed(s, q) + shared_computed(s, q, rounds_shown) + summaries


# --------------------------------------------------------------------------- specs
def _cost(protocol: str):
    """The closed-form cost of one of the five (:func:`topology_cost`)."""

    def cost(
        s,
        n: int,
        rounds: int,
        q: float,
        c: float,
        *,
        density: float | None = None,
        forgetting: bool = False,
        memory: str | None = None,
        prompt_layout: str = "paper",
        n_models: int = 1,
        **_: object,
    ):

        mode = resolve_memory(memory, forgetting, "full")
        if protocol == "mad" and prompt_layout == "shared":
            return shared_cost(s, n, rounds, q, c, mode, n_models)
        if protocol == "cot":
            return topology_cost(s, 1, 1, q, c, 0)
        if protocol == "sc":
            return topology_cost(s, n, 1, q, c, 0, n_models=n_models)
        if protocol == "mad":
            alone = 1.0 if n == 1 else 0.0  # a one-agent MAD reads nobody: it self-checks
            return topology_cost(s, n, rounds, q, c, n - 1, alone, memory=mode, n_models=n_models, fully_connected=True)
        if density is None:
            raise NotCovered(f"{protocol} needs density")
        k = density * (n - 1)
        if protocol == "sparse":
            return topology_cost(s, n, rounds, q, c, k, 1.0 if k == 0 else 0.0, memory=mode, n_models=n_models)
        p = (1 - density) ** (n - 1)
        return topology_cost(s, n, rounds, q, c, k, p, memory=mode, n_models=n_models)  # probmad

    return cost


TOPOLOGY_KINDS = ("regular", "ring", "star", "edges", "full")
DENSITY = Option(
    "density",
    float,
    None,
    "density D = 2|E|/(N(N-1)) of the regular graph (sparse; within 1e-3 of a possible one is taken "
    "as it) or the probability of reading each peer (probmad); a decimal or a fraction such as 2/5",
    low=0.0,
    high=1.0,
    parse=parse_number,
)
DEGREE = Option(
    "degree",
    int,
    None,
    "peers per agent k of the regular graph: --density k/(N-1) (give either)",
    low=0,
    high=MAX_AGENTS - 1,
    hashed=False,  # it sets --density, which the run id hashes: --degree 2 and --density 0.4 are one run
)
TOPOLOGY = Option(
    "topology", str, None, "regular (needs --density), ring, star, edges (needs --edges), full", choices=TOPOLOGY_KINDS
)
EDGES = Option("edges", str, None, "edge list for --topology edges, e.g. '0-1,1-2' (undirected) or '0->1' (1 reads 0)")
CENTER = Option("center", int, 0, "the hub of --topology star", low=0, high=MAX_AGENTS - 1)

_noted: set[str] = set()  # snap notes already logged by this process


def _graph_kind(cfg) -> str:
    return cfg.option(TOPOLOGY) or ("edges" if cfg.option(EDGES) else "regular")


def _resolve_sparse(cfg) -> None:
    """Sparse on a regular graph (``ProtocolSpec.resolve``): ``--degree k`` alone sets
    ``--density k/(N-1)``; a density with no regular graph but within 1e-3 of one (``0.333`` for 4
    agents) becomes that one, with a one-line note (logged once). A density the graph builder
    already accepts is kept as given, so the run ids of earlier runs stay. What cannot be resolved
    is left for :func:`_check_density` to report."""
    n = cfg.experiment.agents
    if _graph_kind(cfg) != "regular" or not isinstance(n, int) or n < 2:
        return
    k = cfg.option(DEGREE)
    if isinstance(k, int) and cfg.option(DENSITY) is None and 0 <= k <= n - 1:
        cfg.set_value(DENSITY.name, k / (n - 1))
        return
    d = cfg.option(DENSITY)
    if not isinstance(d, (int, float)) or isinstance(d, bool) or not 0 <= d <= 1:
        return
    try:
        regular_degree(n, d)
        return
    except TopologyError:
        near = nearest_regular_degree(n, d)
    if near is None:
        return
    cfg.set_value(DENSITY.name, near / (n - 1))
    note = (
        f"--density {d:g} with --agents {n} has no regular graph; using the nearest, "
        f"{fmt_ratio(near, n - 1)} (k={near})"
    )
    if note not in _noted:
        _noted.add(note)
        log.warning(note)


def _check_density(cfg) -> None:
    """--density / --degree / --edges given where the protocol needs them (RunConfig.validate)."""
    if cfg.experiment.protocol == "probmad" and cfg.option(DENSITY) is None:
        raise ConfigError("--density is required with --protocol probmad (probability of seeing each peer)")
    if cfg.experiment.protocol == "sparse":
        kind = _graph_kind(cfg)
        if kind == "regular" and cfg.option(DEGREE) is not None:
            n, k = cfg.n_agents, cfg.option(DEGREE)
            try:
                check_degree(n, k)
            except TopologyError as exc:
                raise ConfigError(str(exc)) from None
            try:
                agrees = cfg.option(DENSITY) is None or regular_degree(n, cfg.option(DENSITY)) == k
            except TopologyError:
                agrees = False
            if not agrees:
                raise ConfigError(
                    f"--degree {k} and --density {cfg.option(DENSITY):g} disagree with --agents {n} "
                    f"(degree {k} is density {fmt_ratio(k, n - 1)}); give one of them"
                )
        if kind == "regular" and cfg.option(DENSITY) is None:
            raise ConfigError("--density (or --degree) is required with --protocol sparse and a regular topology")
        if kind == "edges" and not cfg.option(EDGES):
            raise ConfigError("--edges is required with --topology edges (e.g. '0-1,1-2,2-0')")


def _check_sparse(cfg) -> None:
    _check_density(cfg)
    check_memory(cfg)


def _sparse_unused(cfg) -> set[str]:
    kind = _graph_kind(cfg)
    return ({"center"} if kind != "star" else set()) | ({"degree"} if kind != "regular" else set())


def _memory_label(cfg) -> list[str]:
    mode = cfg.get("memory") or ("last" if cfg.get("forgetting") else None)
    talk = ["one-by-one"] if cfg.get("talk") == "one-by-one" else []
    return ([f"mem={mode}"] if mode else []) + talk


def _mad_label(cfg) -> list[str]:
    return _memory_label(cfg) + layout_label(cfg)


def _check_mad(cfg) -> None:
    """MAD's memory, and ``--prompt-layout shared`` only with simultaneous talk."""
    check_memory(cfg)
    if cfg.option(PROMPT_LAYOUT) == "shared" and cfg.option(TALK) == "one-by-one":
        raise ConfigError(
            "--prompt-layout shared needs --talk simultaneous: one by one, each agent reads a different mix of "
            "this round's and the last round's replies, so no board is the same for every reader"
        )


def _graph_label(cfg) -> list[str]:
    parts = _memory_label(cfg)
    if cfg.get("topology") and cfg["topology"] != "regular":
        parts.append(cfg["topology"])
    if cfg.get("density") is not None:
        parts.append(f"D={fmt_num(cfg['density'])}")
    return parts


SPECS = (
    ProtocolSpec(
        "cot",
        topology_debate,
        "CoT: one agent, one round",
        "CoT",
        shape=lambda cfg: (1, 1),
        validate=validate,
        topology=build_topology,
        cost=_cost("cot"),
    ),
    ProtocolSpec(
        "sc",
        topology_debate,
        "CoT-SC(k): k = --agents independent samples, one round, vote",
        "CoT-SC",
        shape=lambda cfg: (cfg.experiment.agents, 1),
        validate=validate,
        topology=build_topology,
        cost=_cost("sc"),
        example="--agents 5",
    ),
    ProtocolSpec(
        "mad",
        topology_debate,
        "fully connected MAD (Du et al. 2023)",
        "MAD",
        settings=(FORGETTING, MEMORY, TALK, PROMPT_LAYOUT),
        check=_check_mad,
        validate=validate,
        topology=build_topology,
        stages=SUMMARY_STAGES,
        cost=_cost("mad"),
        label_parts=_mad_label,
        example="--agents 3 --rounds 2",
    ),
    ProtocolSpec(
        "sparse",
        topology_debate,
        "sparse MAD on a regular graph of --density, or --topology (Li et al. 2024)",
        "sparse MAD",
        settings=(DENSITY, DEGREE, TOPOLOGY, EDGES, CENTER, FORGETTING, MEMORY, TALK),
        unused=_sparse_unused,
        check=_check_sparse,
        resolve=_resolve_sparse,
        stages=SUMMARY_STAGES,
        validate=validate,
        topology=build_topology,
        cost=_cost("sparse"),
        label_parts=_graph_label,
        example="--agents 6 --rounds 3 --density 2/5",
    ),
    ProtocolSpec(
        "probmad",
        topology_debate,
        "ProbMAD: each peer read with probability --density, redrawn (Li et al. 2024, app. E)",
        "ProbMAD",
        settings=(DENSITY, FORGETTING, MEMORY, TALK),
        check=_check_sparse,
        stages=SUMMARY_STAGES,
        validate=validate,
        topology=build_topology,
        cost=_cost("probmad"),
        cost_kind="estimate",
        label_parts=_graph_label,
        example="--agents 6 --rounds 3 --density 0.4",
    ),
)
