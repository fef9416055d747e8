"""GroupDebate (GD): Liu et al., "GroupDebate: Enhancing the Efficiency of Multi-Agent Debate
Using Group Discussion" (AAMAS 2026), sec. 3.1 and Alg. 1 (appendix A).

The M agents are shuffled and split into N groups (:mod:`topologies.groups`; Alg. 1 lines 1-2).
The T rounds form S = ceil(T / R) stages of R rounds (``--stage-rounds``, the paper's default 2).
For the s-th stage's r-th round (sec. 3.1):

1. **Initial thinking** (s = 1, r = 1): every agent answers the question (stage "first").
2. **Intra-group debate** (r > 1): every agent reads the previous round's replies of the *other*
   members of its group (stage "gd_intra", Table 3's intra-group prompt).
3. **Inter-group debate** (s > 1, r = 1): every agent reads the group summaries made at the end
   of the previous stage — its own group's and the others' (stage "gd_inter", Table 3's
   inter-group prompt; eq. 4 counts all N summaries).

At the end of every stage but the last, each group's latest replies are summarised by one LLM
call per group (``SummaryCall``, stage "gd_summary", Table 3's summary prompt; Alg. 1 lines
30-36). After the last round all agents vote (Alg. 1 line 42): the majority of every agent's
final answer. GD has no early stop.

Memory: the paper keeps "only output from the last round or summary generated from the last
stage" (sec. 4.1; Alg. 1 keeps ``H_i = [Q, own last reply, what it reads now]``), so every GD
agent call uses ``memory="last"`` by default: the first prompt, the agent's previous reply and
the new message. ``--memory full`` keeps every agent's whole transcript instead: the paper's
"MAD+Group" ablation (sec. 4.4, Fig. 9). The summary modes are the MAD family's, not GD's.

Choices where the paper leaves room (each said again where it is coded):

* Groups are drawn once per run from ``--seed`` (not per question), so all questions of a run
  are debated by the same groups. Default when ``--groups`` is not given: 2 groups if M >= 4,
  else 1 (:func:`topologies.groups.default_group_sizes`).
* An agent alone in its group has nobody to read in an intra-group round (Alg. 1 line 20 gives
  it an empty buffer but still calls it): it gets the engine's "self_check" prompt.
* A summary is served by the model of the group's lowest-id member (the paper has one model).
* Summary steps are yielded as their own :class:`Step` with the round index of the round whose
  replies they summarise (so in the calls table they sit in that round, agent_id -1).
* ``peers`` of an inter-group call are the agents whose replies went into the summaries it
  reads, minus the agent itself (the graph table has no self-loops); summary calls record the
  group's members as ``sources``.
* Table 3's summary prompt has no ``<Output Format>`` (it asks for the answers "in
  parentheses"), so "gd_summary" has no ``$format``; a config override may add it.
* The paper's system prompt (Table 3, "Welcome to the debate! ...") is :data:`GD_SYSTEM_PROMPT`;
  it is not applied by default, so GD runs on the same system prompt as the other protocols.
  Pass it with ``--system-prompt`` to reproduce the paper exactly.

``--prompt-layout shared`` (:mod:`engine.protocols.layout`): an intra-group round shows each group
one board of its members' replies, an inter-group round everyone one board of the summaries
(:class:`SharedBoards`); the paper's prompts otherwise.

Token-cost equations (sec. 3.2, Alg. 3 of appendix B.2) are implemented as the pure functions
:func:`gd_first_round_tokens`, :func:`gd_intra_round_tokens` (eq. 3),
:func:`gd_inter_round_tokens` (eq. 4), :func:`gd_summary_tokens` (Alg. 3 line 6) and
:func:`gd_total_tokens` (eq. 7 / Alg. 3 line 12), below, next to the closed form :func:`group_cost`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.cost_model import (
    Cost,
    Sizes,
    Stage,
    first_call,
    first_computed,
    header,
    last_memory_call,
    replies_cached,
    summary_computed,
    summary_head,
    turn_computed,
)
from engine.options import MAX_ROUNDS, Option
from engine.protocols.base import AgentCall, Board, Context, Outcome, ProtocolGen, Step, SummaryCall, vote
from engine.protocols.layout import (
    PROMPT_LAYOUT,
    BoardKey,
    Readers,
    answer_board,
    board_summary_call,
    board_tokens,
    group_label,
    is_shared,
    keep,
    layout_label,
    shared_computed,
    shared_prompt,
    shared_sizes,
    summary_board,
    who,
)
from engine.protocols.shared import MEMORY as MEMORY_OPTION
from engine.protocols.shared import check_memory, memory_mode
from engine.protocols.spec import ProtocolSpec
from topologies.groups import Groups, make_groups, n_stages, parse_group_sizes, stage_plan

MEMORY = "last"  # GD sec. 4.1: only the last round's output / the last stage's summary is kept

GD_SYSTEM_PROMPT = (
    "Welcome to the debate! You are a seasoned debater with expertise in succinctly and persuasively "
    "expressing your viewpoints. You will be assigned to debate groups, where you will engage in "
    "discussions with fellow participants. The outcomes of each group's deliberations will be shared "
    "among all members. It is crucial for you to leverage this information effectively in order to "
    "critically analyze the question at hand and ultimately arrive at the correct answer. Best of luck!"
)

# Table 3 (appendix C) of the GD paper; "<Output Format>" is the task's $format sentence (Table 4).
GD_STAGES = {
    "gd_intra": (
        "These are the recent opinions from other agents:\n$peers\n"
        "Using the opinions carefully as additional advice, can you provide an updated answer? "
        "Examine your solution and that other agents step by step. $format"
    ),
    "gd_summary": (
        "These are the recent/updated opinions from all agents:\n$peers\n"
        "Summarize these opinions carefully and completely in no more than 80 words. "
        "Aggregate and put your final answers in parentheses at the end of your response."
    ),
    "gd_inter": (
        "These are the recent opinions from all groups:\n"
        "Your group response: ```$own_summary```\n"
        "Other group responses: $other_summaries\n"
        "Using the reasoning from all groups as additional advice, can you give an updated answer? "
        "Examine your solution and that all groups step by step. $format"
    ),
}

NO_OTHER_GROUPS = "(none: there is only one group)"


def group_block(summaries: Sequence[str]) -> str:
    """How group summaries are listed inside a prompt (one line per group)."""
    return "".join(f"\nOne group response: ```{s}```\n" for s in summaries)


def in_groups(calls: list[AgentCall], groups: Groups) -> list[AgentCall]:
    """``calls``, each marked with its agent's group (:attr:`AgentCall.group`, ``calls.group``)."""
    for call in calls:
        call.group = groups.group_of(call.agent)
    return calls


def run_groups(ctx: Context) -> Groups:
    """The run's groups: ``--groups`` sizes, shuffled with ``--seed`` (same for every question)."""
    return make_groups(ctx.cfg.option(GROUPS), ctx.n_agents, seed=ctx.cfg.experiment.seed)


def validate(cfg) -> None:
    """Checks before a run starts (``engine.protocols.validate_protocol``): the groups (a
    :class:`topologies.TopologyError` naming ``--groups`` and ``--agents``) and the schedule."""
    make_groups(cfg.option(GROUPS), cfg.n_agents, seed=cfg.experiment.seed)
    stage_plan(cfg.n_rounds, cfg.option(STAGE_ROUNDS))


def summary_calls(
    groups: Groups, texts: list[str], answers: list[str | None], stage: str, members: list[list[int]] | None = None
) -> list[SummaryCall]:
    """One summary call per group over the latest replies of ``members[j]`` (default: the whole
    group, Alg. 1 lines 31-35); served by the model of the group's lowest-id member."""
    calls = []
    for j, g in enumerate(groups.members):
        read = list(g) if members is None else list(members[j])
        calls.append(
            SummaryCall(
                group=j,
                texts=[texts[a] for a in read],
                agent=g[0],
                answers=[answers[a] for a in read],
                sources=read,
                stage=stage,
            )
        )
    return calls


def _paper_call(
    kind: str,
    i: int,
    groups: Groups,
    texts: list[str],
    answers: list[str | None],
    summaries: list[tuple[str, str | None, list[int]]],
    summarised: list[int],
    memory: str,
) -> AgentCall:
    """Agent i's call in a round of ``kind`` (first, intra, inter), the paper's prompts."""
    if kind == "first":  # (1) initial thinking, Alg. 1 lines 12-15
        return AgentCall(agent=i, stage="first", memory=memory)
    if kind == "intra":  # (2) intra-group debate, Alg. 1 lines 19-26
        mates = groups.mates(i)
        return AgentCall(
            agent=i,
            stage="gd_intra" if mates else "self_check",
            peers=mates,
            peer_texts=list(zip(mates, map(texts.__getitem__, mates))),
            peer_answers=list(map(answers.__getitem__, mates)),
            memory=memory,
        )
    # (3) inter-group debate, Alg. 1 lines 16-18 and 38-40: all N summaries
    own = groups.group_of(i)
    others = [j for j in range(groups.n_groups) if j != own]
    read_from = [a for a in summarised if a != i]
    return AgentCall(
        agent=i,
        stage="gd_inter",
        peers=read_from,
        values={
            "own_summary": summaries[own][0],
            "other_summaries": group_block([summaries[j][0] for j in others]) if others else NO_OTHER_GROUPS,
        },
        peer_answers=[summaries[own][1]] + [summaries[j][1] for j in others],
        memory=memory,
        summaries=[own, *others],
    )


def group_debate(ctx: Context) -> ProtocolGen:
    """GroupDebate, Alg. 1 of the paper's appendix A (see the module docstring)."""
    cfg, n = ctx.cfg, ctx.n_agents
    memory = memory_mode(cfg, MEMORY)
    groups = run_groups(ctx)
    plan = stage_plan(ctx.n_rounds, cfg.option(STAGE_ROUNDS))
    texts: list[str] = [""] * n
    answers: list[str | None] = [None] * n
    history: list[list[str | None]] = []
    summaries: list[tuple[str, str | None, list[int]]] = []  # per group: text, answer, sources
    summary_answers: list[list[str | None]] = []

    shared = SharedBoards(groups.n_groups, memory) if is_shared(cfg) else None
    for rp in plan:
        summarised = sorted({a for summary in summaries for a in summary[2]})  # every source of a summary
        if shared is not None and rp.kind == "intra":
            calls = shared.intra(rp.round, groups, [list(g) for g in groups.members], texts, answers)
        elif shared is not None and rp.kind == "inter":
            shown = [(j, text, answer) for j, (text, answer, _) in enumerate(summaries)]
            calls = shared.inter(rp.round, groups, shown, summarised)
        else:
            calls = [_paper_call(rp.kind, i, groups, texts, answers, summaries, summarised, memory) for i in range(n)]
        replies = yield Step(rp.round, in_groups(calls, groups))
        texts = [r.shown_text for r in replies]
        answers = [r.answer for r in replies]
        history.append(list(answers))

        if rp.summarize_after:  # end of a stage that is not the last: Alg. 1 lines 30-36
            scalls = summary_calls(groups, texts, answers, "gd_summary")
            sreplies = yield Step(rp.round, scalls if shared is None else on_boards(scalls, rp.round, texts))
            summaries = [(r.shown_text, r.answer, list(g)) for r, g in zip(sreplies, groups.members)]
            summary_answers.append([r.answer for r in sreplies])

    return Outcome(
        final_answer=vote(ctx, answers),  # Alg. 1 line 42: VOTE over every agent's last answer
        answers_by_round=history,
        info={
            "groups": [list(g) for g in groups.members],
            "stage_rounds": cfg.option(STAGE_ROUNDS),
            "stages": n_stages(ctx.n_rounds, cfg.option(STAGE_ROUNDS)),
            "summary_answers": summary_answers,
        },
    )


def on_boards(calls: list[SummaryCall], round_: int, texts: list[str]) -> list[SummaryCall]:
    """``--prompt-layout shared``: each summary call shows its sources as a board (labelled, in id order)."""
    for call in calls:
        call.board = answer_board(round_, call.sources, texts)
    return calls


class SharedBoards:
    """The boards of GroupDebate and S2-MAD under ``--prompt-layout shared``
    (:mod:`engine.protocols.layout`), kept per group: an intra-group round shows each group the
    board of the replies it is given (its members'; S2-MAD: its unique ones); an inter-group
    round shows every group one board of the summaries given, in group order, labelled
    "Group j". ``memory`` ``full`` keeps every board a group was shown, ``last`` the newest only.
    All members of a group are shown the same boards, so they share a prefix; the summaries'
    board is the same for everyone."""

    def __init__(self, n_groups: int, memory: str):
        self.kept: list[tuple[Board, ...]] = [() for _ in range(n_groups)]
        self.memory = memory

    def _show(self, boards: list[Board]) -> None:
        self.kept = [keep(k, b, self.memory) for k, b in zip(self.kept, boards)]

    def _call(self, i: int, j: int, stage: str, peers: list[int], peer_answers: list, read: list[int]) -> AgentCall:
        return AgentCall(
            agent=i,
            stage=stage,
            peers=peers,
            values=who(i, j),
            peer_answers=peer_answers,
            summaries=read,
            group=j,
            boards=self.kept[j],
        )

    def intra(
        self,
        round_: int,
        groups: Groups,
        shown: list[list[int]],
        texts: list[str],
        answers: list[str | None],
        speakers: Sequence[int] | None = None,
        stage: str = "gd_intra",
    ) -> list[AgentCall]:
        """An intra-group round: group j is shown the board of round ``round_`` - 1's replies of
        ``shown[j]``; one call (kind ``stage``, or ``self_check`` for an agent alone on its board)
        per agent of ``speakers`` (default: all)."""
        self._show([answer_board(round_ - 1, agents, texts) for agents in shown])
        calls = []
        for i in range(groups.n) if speakers is None else speakers:
            j = groups.group_of(i)
            peers = [a for a in shown[j] if a != i]
            calls.append(self._call(i, j, stage if peers else "self_check", peers, [answers[a] for a in peers], []))
        return calls

    def inter(
        self,
        round_: int,
        groups: Groups,
        shown: list[tuple[int, str, str | None]],
        summarised: list[int],
        speakers: Sequence[int] | None = None,
        stage: str = "gd_inter",
    ) -> list[AgentCall]:
        """An inter-group round: everyone is shown one board of the summaries ``shown`` (group,
        text, answer); one call per agent of ``speakers`` (default: all), reading the summaries'
        sources (``summarised``) but itself."""
        self._show([summary_board(round_ - 1, [(group_label(j), text) for j, text, _ in shown])] * groups.n_groups)
        read, said = [j for j, _, _ in shown], [answer for _, _, answer in shown]
        calls = []
        for i in range(groups.n) if speakers is None else speakers:
            calls.append(self._call(i, groups.group_of(i), stage, [a for a in summarised if a != i], said, read))
        return calls


# ---------------------------------------------------------------------------
# token-cost equations (sec. 3.2 and appendix B.2, Alg. 3)
# ---------------------------------------------------------------------------
# Sizes are token counts. ``groups`` is a sequence of groups of agent ids (``Groups.members``);
# ``outputs[i]`` is agent i's output size in the round, ``prev_outputs[i]`` in the previous one;
# ``summaries[j]`` the size of group j's summary of the previous stage; ``q`` the question prompt.

# --------------------------------------------------------------------------- cost model
# closed forms described in engine.cost_model's docstring


def group_cost(
    s: Sizes,
    n_agents: int,
    rounds: int,
    question_tokens: float,
    reply_tokens: float,
    groups: Any = None,
    stage_rounds: int = 2,
    memory: str = "last",
    n_models: int = 1,
) -> Cost:
    """GroupDebate, exact (see the module docstring): the schedule is :func:`topologies.groups.stage_plan`.

    ``memory="full"`` (the "MAD+Group" ablation): a round-t call's context is the first prompt,
    the t replies and every earlier message of the agent instead of ``H``; the messages summed
    over agents are the same per round kind, so the context of round t over all agents is
    ``N (B + t (f + C)) + (sum of the earlier rounds' messages)``.

    Computed prefill, exact: round 0 once per model (``n_models``), each later call its message
    and its reply unless cached after its previous prompt (:func:`~engine.cost_model.turn_computed`,
    :func:`~engine.cost_model.replies_cached`), each summary all but its stage's
    lead (the groups are disjoint: no two summaries share a reply)."""
    intra, summ, inter = s.need("gd_intra", "gd_summary", "gd_inter")
    sizes = parse_group_sizes(groups, n_agents)
    n, n_groups, q, c = n_agents, len(sizes), question_tokens, reply_tokens
    alone = sum(1 for m in sizes if m == 1)
    peer = s.a3 + c
    pairs = sum(m * m for m in sizes) - n  # replies read per intra round, sum_j n_j (n_j - 1)
    intra_msgs = (n - alone) * (s.f + intra.tokens(q)) + alone * (s.f + s.a4 + q) + intra.views * pairs * peer
    others = (n_groups - 1) * (s.block + c) if n_groups > 1 else s.no_other
    inter_msgs = n * (s.f + inter.tokens(q) + inter.extra * c + inter.views * others)
    summary_step = n_groups * (s.g + s.f + summ.tokens(q)) + summ.views * n * peer
    prompt, calls, earlier = n * first_call(s, q), n, 0.0
    computed = max(1, min(n_models, n)) * first_computed(s, q)
    for rp in stage_plan(rounds, stage_rounds):
        if rp.kind != "first":
            msgs = intra_msgs if rp.kind == "intra" else inter_msgs
            if memory == "full":
                prompt += n * (first_call(s, q) + rp.round * (s.f + c)) + earlier + msgs
            else:
                prompt += n * last_memory_call(s, q, c) + msgs
            earlier += msgs
            computed += n * turn_computed(s, c, 0) + msgs
        calls += n if rp.kind != "first" else 0
        if rp.summarize_after:
            prompt += summary_step
            computed += summary_step - n_groups * (header(s) + summ.lead)
            calls += n_groups
    computed -= c * replies_cached(n, rounds - 1, memory == "full")
    once = summary_head(s, summ) if any(rp.summarize_after for rp in stage_plan(rounds, stage_rounds)) else 0.0
    return Cost(prompt, calls * c, calls, computed, "exact" if n_models == 1 or not once else "estimate", once)


def shared_group_cost(
    s: Sizes,
    n_agents: int,
    rounds: int,
    question_tokens: float,
    reply_tokens: float,
    groups: Any = None,
    stage_rounds: int = 2,
    memory: str = "last",
    n_models: int = 1,
) -> Cost:
    """GroupDebate under ``--prompt-layout shared`` (:class:`SharedBoards`), exact: an agent of
    group j is sent ``B + (its group's kept boards) + turn`` (:func:`engine.protocols.layout.shared_prompt`);
    an intra round adds to group j the board of its n_j replies, an inter round the board of the
    G summaries; a summary call shows its group's board."""
    (summ,) = s.need("gd_summary")
    sizes = parse_group_sizes(groups, n_agents)
    q, c = question_tokens, reply_tokens
    kept: list[list[float]] = [[] for _ in sizes]
    prompt, calls = n_agents * first_call(s, q), float(n_agents)
    for rp in stage_plan(rounds, stage_rounds):
        if rp.kind != "first":
            new = [board_tokens(s, q, c, len(sizes), "group")] * len(sizes) if rp.kind == "inter" else None
            for j, m in enumerate(sizes):
                board = new[j] if new else board_tokens(s, q, c, m)
                kept[j] = kept[j] + [board] if memory == "full" else [board]
                prompt += m * shared_prompt(s, q, sum(kept[j]), group=True)
            calls += n_agents
        if rp.summarize_after:
            prompt += sum(board_summary_call(s, summ, q, c, m) for m in sizes)
            calls += len(sizes)
    plan = stage_plan(rounds, stage_rounds)
    computed = shared_groups_computed(s, q, c, summ, plan, [(m, m) for m in sizes], memory)
    once = shared_summary_head(s, summ, len(sizes)) if any(rp.summarize_after for rp in plan) else 0.0
    return Cost(prompt, calls * c, calls, computed, "exact" if n_models == 1 else "estimate", once)


def shared_summary_head(s: Sizes, summ: Stage, n_groups: int) -> float:
    """:func:`~engine.cost_model.summary_head` of the groups' summary calls on boards: the first
    one's, and for each other group where its first label parts from the first group's."""
    L = shared_sizes(s)
    return summary_head(s, summ, board=True) + (n_groups - 1) * (L.agent_text_lead - L.agent_label_lead)


def shared_groups_computed(
    s: Sizes, q: float, c: float, summ: Stage, plan: Sequence[Any], groups: Sequence[tuple[int, int]], memory: str
) -> float:
    """Computed prefill of GroupDebate or S2-MAD under the shared layout (one model): round 0,
    then per round each group's board (``groups``: per group its size and how many of it speak in
    an intra round; everyone speaks in an inter round) read as
    :func:`engine.protocols.layout.shared_computed` counts it, and each summary call all but its
    stage's lead. With several models each model's first reader of a board computes it: more."""
    sizes = [m for m, _ in groups]
    kept: list[tuple[BoardKey, ...]] = [() for _ in groups]
    shown: list[list[Readers]] = []
    summaries = 0.0
    for rp in plan:
        if rp.kind != "first":
            inter = BoardKey("group", rp.round - 1, group_label(0), None, board_tokens(s, q, c, len(groups), "group"))
            new = [
                inter if rp.kind == "inter" else BoardKey("agent", rp.round - 1, j, j, board_tokens(s, q, c, m))
                for j, m in enumerate(sizes)
            ]
            kept = [keep(old, b, memory) for old, b in zip(kept, new)]
            speak = sizes if rp.kind == "inter" else [k for _, k in groups]
            shown.append([Readers(0, kept[j], k, group=True) for j, k in enumerate(speak)])
        if rp.summarize_after:
            summaries += sum(summary_computed(s, board_summary_call(s, summ, q, c, m), summ, board=True) for m in sizes)
    return first_computed(s, q) + shared_computed(s, q, shown) + summaries


def gd_first_round_tokens(q: float, outputs: Sequence[float]) -> float:
    """Initial thinking, Alg. 3 line 1: ``Token_1^1 = M x Q + sum_i Output_i^1``."""
    return len(outputs) * q + sum(outputs)


def gd_intra_round_tokens(
    groups: Sequence[Sequence[int]], q: float, outputs: Sequence[float], prev_outputs: Sequence[float]
) -> float:
    """Eq. 3, one intra-group round:
    ``sum_j sum_{i in G_j} (Q + Output_i^t + sum_{i' in G_j} Output_{i'}^{t-1})``.

    The inner sum includes i itself: the agent's own previous reply stays in its context next to
    its group mates' replies."""
    return sum(q + outputs[i] + sum(prev_outputs[k] for k in g) for g in groups for i in g)


def gd_inter_round_tokens(
    q: float, outputs: Sequence[float], prev_outputs: Sequence[float], summaries: Sequence[float]
) -> float:
    """Eq. 4, one inter-group round:
    ``sum_i (Q + Output_i^{t-1} + sum_j Summary_j^{s-1} + Output_i^t)`` — every agent reads all
    N group summaries."""
    return sum(q + prev_outputs[i] + sum(summaries) + outputs[i] for i in range(len(outputs)))


def gd_summary_tokens(
    groups: Sequence[Sequence[int]], prev_outputs: Sequence[float], summaries: Sequence[float]
) -> float:
    """Summary generation at the end of a stage, Alg. 3 line 6:
    ``sum_j (sum_{i in G_j} Output_i^{(s-1)R} + Summary_j^{s-1})`` (no question prompt)."""
    return sum(sum(prev_outputs[i] for i in g) + summaries[j] for j, g in enumerate(groups))


def gd_total_tokens(
    groups: Sequence[Sequence[int]],
    q: float,
    outputs_by_round: Sequence[Sequence[float]],
    summaries_by_stage: Sequence[Sequence[float]],
    stage_rounds: int,
) -> float:
    """Eq. 7 / Alg. 3 line 12: initial thinking + every stage's summary and inter-group round +
    every intra-group round. ``outputs_by_round`` has one list per round (T of them);
    ``summaries_by_stage[s]`` the summary sizes made at the end of 0-based stage ``s`` (S-1 lists)."""
    t_total = len(outputs_by_round)
    plan = stage_plan(t_total, stage_rounds)
    need = sum(p.summarize_after for p in plan)
    if len(summaries_by_stage) < need:
        raise ValueError(
            f"{t_total} rounds with R={stage_rounds} need {need} summary lists, got {len(summaries_by_stage)}"
        )
    total = 0.0
    for p in plan:
        out = outputs_by_round[p.round]
        if p.kind == "first":
            total += gd_first_round_tokens(q, out)
            continue
        prev = outputs_by_round[p.round - 1]  # only round 0 is "first": the others follow one
        if p.kind == "intra":
            total += gd_intra_round_tokens(groups, q, out, prev)
        else:
            sums = summaries_by_stage[p.stage - 1]
            total += gd_summary_tokens(groups, prev, sums) + gd_inter_round_tokens(q, out, prev, sums)
    return total


def _cost(
    s,
    n: int,
    rounds: int,
    q: float,
    c: float,
    *,
    groups=None,
    stage_rounds: int = 2,
    memory: str | None = None,
    prompt_layout: str = "paper",
    n_models: int = 1,
    **_: object,
):
    cost = shared_group_cost if prompt_layout == "shared" else group_cost
    return cost(s, n, rounds, q, c, groups, stage_rounds, memory or MEMORY, n_models)


def _check(cfg) -> None:
    check_memory(cfg, ("full", "last"))


def _label(cfg) -> list[str]:
    memory = [f"mem={cfg['memory']}"] if cfg.get("memory") not in (None, MEMORY) else []
    return groups_label(cfg) + memory + layout_label(cfg)


GROUPS = Option(
    "groups",
    str,
    None,
    "group sizes '2+2+4' or a number of equal groups (default: 2 near-equal groups from 4 agents, else 1; "
    "the papers give no default)",
    also=(int, list),
)
STAGE_ROUNDS = Option(
    "stage_rounds", int, 2, "intra-group rounds per stage R (stages S = ceil(rounds / R))", low=1, high=MAX_ROUNDS
)


def groups_label(cfg) -> list[str]:
    return [f"G={cfg['groups']}"] if cfg.get("groups") else []


SPEC = ProtocolSpec(
    "group",
    group_debate,
    "GroupDebate: groups debate inside, share summaries between stages (Liu et al.)",
    "GroupDebate",
    settings=(GROUPS, STAGE_ROUNDS, MEMORY_OPTION, PROMPT_LAYOUT),
    check=_check,
    validate=validate,
    stages=GD_STAGES,
    cost=_cost,
    label_parts=_label,
    example="--agents 6 --rounds 3 --groups 3+3",
)


__all__ = [
    "GD_STAGES",
    "GD_SYSTEM_PROMPT",
    "GROUPS",
    "SPEC",
    "STAGE_ROUNDS",
    "MEMORY",
    "group_block",
    "group_debate",
    "run_groups",
    "summary_calls",
    "validate",
]
