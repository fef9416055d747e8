"""S2-MAD: Zeng et al., "S2-MAD: Breaking the Token Barrier to Enhance Multi-Agent Debate
Efficiency" (NAACL 2025), sec. 3 and Alg. 1 (appendix A).

S2-MAD is GroupDebate (:mod:`engine.protocols.group_debate`: groups, stages of R rounds, group
summaries at the end of every stage but the last, forgetting memory, majority vote) plus a
*Decision-Making Mechanism* (sec. 3.2) applied before every debate round:

1. **Similarity Calculation Module.** Two views are similar when their extracted answers are
   equal (``--similarity answer``, the paper's "regular expression matching", used for its main
   results) or when the cosine similarity of their embeddings is ``>= --tau``
   (``--similarity embedding``; the protocol yields :class:`Similarity` with the texts and reads
   the matrix). A view is an agent's latest reply or a group summary.
2. **Redundancy Filtering Module.** An agent receives only views that differ from its own and
   from each other (of mutually similar views the first, in agent / group order, is kept).
   In an intra-group round the candidates are its group mates' latest replies (Alg. 1 lines
   25-28); in an inter-group round the summary pool is first de-duplicated, ``Sum <- F(Sum)``
   (Alg. 1 line 46), and the agent reads the remaining summaries that differ from its own view
   (lines 19-22). Group summaries are made from the group's *unique* replies (sec. 4.1: "we
   filter and summarize the results from the same groups"; Table 5: "unique opinions"); a
   summary call records as ``sources`` the agents whose replies it read.
3. **Conditional Participation Module.** ``D_i`` (eq. 1) counts the views (group mates or
   summaries) that differ from agent i's; the agent speaks iff ``D_i > 0`` (eq. 2, Alg. 1 line
   31 ``if len(buf) != 0``). A silent agent makes no LLM call, keeps its memory and its previous
   answer (carried into ``answers_by_round``) and counts in ``Outcome.skipped_turns``.
4. **Early stop** (sec. 3.1 "Reaching Consensus", Alg. 1 lines 46-47): right after the group
   summaries of a stage, if the redundancy filter leaves one summary (all summaries similar),
   the debate ends and the agents vote. ``--no-early-stop`` never stops early.

Choices where the paper leaves room:

* Early stop needs at least two groups. Alg. 1 line 47 read literally (``len(F(Sum)) = 1``)
  would end every one-group debate after its first stage whatever the agents think, since one
  summary is always "one"; the paper's text asks for "information exchanged between groups"
  and "all summarized viewpoints align", which needs two or more groups.
* An unparseable answer (``None``) is similar to nothing (see
  :func:`topologies.groups.similar_by_answer`): an agent without an answer always debates, and
  unparseable summaries never trigger the early stop.
* Embedding mode: one :class:`Similarity` request over the agents' latest texts before every
  intra-group round and before the summaries; after the summaries, one over the agents' texts
  plus the N summaries (it serves both the early-stop test and the next inter-group round).
* ``--no-filter`` (the paper's "w/o Filter" ablation, Table 4): no redundancy filter anywhere —
  an agent that speaks reads *all* its group mates / *all* N summaries, and summaries read all
  group replies — but participation stays conditional (``D_i > 0``, eqs. 1-2) and the early stop
  is unchanged. Reason: the paper ablates the jump (conditional participation) separately
  ("w/o Jump"), and its "w/o Filter" run costs less than GD (13.4k vs 15.5k tokens), which
  only fits agents still skipping. Since the views are then no longer "unique", that ablation
  uses GroupDebate's prompts ("gd_intra", "gd_summary", "gd_inter") instead of Table 5's.
* ``--no-jump`` (the paper's "w/o Jump" ablation, Table 4): conditional participation off —
  every agent speaks in every round. An agent that the filter leaves with no view to read (all
  its mates / summaries agree with it) gets the self-check prompt: the paper's "redundant
  checks" it blames for that row's lower accuracy.
* ``--group-density D`` (the paper's "w/ Sparse Commu." row, whose topology the paper does not
  give): inside a group of n_j agents each agent reads k_j = max(1, round(D (n_j - 1))) mates,
  the next ones after it in the group's (sorted) order, cyclically (shown in id order) — a directed circulant graph,
  the densest-first analogue of the sparse paper's regular graphs. D = 1 (default) is every
  mate. D_i (eq. 1) counts differing views among the mates it reads. Summaries still read the
  whole group.
* If every agent is silent in a round, no :class:`Step` is yielded; the round still counts
  (its answers are the carried ones), because the schedule went through it.
* Everything else (groups from ``--seed`` once per run, default groups, summary model, round
  index of summary steps, ``memory="last"``, recorded peers) is as in GroupDebate.

``--prompt-layout shared`` (:mod:`engine.protocols.layout`): the same agents speak, each shown its
group's board of unique replies or the board of the summaries left by the filter
(:func:`_shared_round`); ``--group-density`` below 1 is refused.

Token-cost equations: :func:`s2_differing_count` (eq. 1), :func:`s2_participation` (eq. 2),
:func:`s2_intra_round_tokens` (eq. 3), :func:`s2_inter_round_tokens` (eq. 4),
:func:`s2_summary_tokens` (Alg. 2 line 7), below. Eq. 3 as printed needs
two corrections, explained in :func:`s2_intra_round_tokens`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.cost_model import Cost, Sizes, first_call, first_computed, header, last_memory_call, summary_head
from engine.options import ConfigError, Option
from engine.protocols.base import AgentCall, Context, Outcome, ProtocolGen, Similarity, Step, vote
from engine.protocols.group_debate import (
    GROUPS,
    MEMORY,
    NO_OTHER_GROUPS,
    STAGE_ROUNDS,
    SharedBoards,
    group_block,
    groups_label,
    in_groups,
    on_boards,
    run_groups,
    shared_groups_computed,
    shared_summary_head,
    summary_calls,
)
from engine.protocols.group_debate import validate as _validate_groups
from engine.protocols.layout import (
    PROMPT_LAYOUT,
    board_summary_call,
    board_tokens,
    is_shared,
    layout_label,
    shared_prompt,
)
from engine.protocols.shared import EARLY_STOP, EMBEDDING_MODEL
from engine.protocols.spec import ProtocolSpec
from topologies.groups import (
    Matrix,
    all_similar,
    dedup,
    differing,
    n_stages,
    parse_group_sizes,
    participates,
    redundancy_filter,
    similar_by_answer,
    similar_by_cosine,
    stage_plan,
)

# Table 5 (appendix C) of the S2-MAD paper; "<Output Format>" is the task's $format sentence.
S2_STAGES = {
    "s2_intra": (
        "These are the recent unique opinions from other agents that differ with yours:\n$peers\n"
        "Using the opinions carefully as additional advice, can you provide an updated answer? "
        "Examine your solution and that other agents step by step. $format"
    ),
    "s2_summary": (
        "These are the recent/updated and unique opinions from all agents:\n$peers\n"
        "Summarize these opinions carefully and completely in no more than 80 words. "
        "Aggregate and put your final answers in parentheses at the end of your response."
    ),
    "s2_inter": (
        "These are the recent unique opinions from all groups:\n$summaries\n"
        "Using the reasoning from all groups as additional advice, can you give an updated answer? "
        "Examine your solution and that all groups step by step. $format"
    ),
}


log = logging.getLogger(__name__)
_TAU_WARNED: set[str] = set()  # embedders already warned about (one line per process, not per sweep cell)


def _gsm8k_like(cfg) -> bool:
    """Whether the run's questions are GSM8K-like word problems (``--task numeric``, or a data set
    named after GSM8K), for which the paper's threshold is ~0.1, not 0.4."""
    ex = cfg.experiment
    return ex.task == "numeric" or "gsm8k" in str(ex.dataset).lower()


def tau_warning(cfg) -> str | None:
    """The one-line warning for ``--tau`` left at its default where the paper used another value,
    or None.

    The paper's thresholds (0.4 on MATH, ~0.1 on GSM8K) were found with bert-base-uncased
    vectors (sec. 4.1); cosine scales differ between embedders (all-MiniLM-L6-v2, the default
    here, spreads unrelated texts lower), so the same tau keeps a different share of views. With
    bert-base vectors on GSM8K-like questions the default 0.4 is the MATH value: the warning names
    the paper's ~0.1."""
    if cfg.option(SIMILARITY) != "embedding" or cfg.option(TAU) != TAU.default:
        return None
    if "bert-base" in cfg.option(EMBEDDING_MODEL).lower():
        if not _gsm8k_like(cfg):
            return None
        return (
            f"S2-MAD: --tau {cfg.option(TAU)} is the paper's threshold on MATH; on GSM8K it used ~0.1 "
            f"(sec. 4.1): give --tau 0.1 to run as the paper did"
        )
    return (
        f"S2-MAD: --tau {cfg.option(TAU)} is the paper's threshold for bert-base-uncased embeddings (MATH; ~0.1 on "
        f"GSM8K); --embedding-model {cfg.option(EMBEDDING_MODEL)} has another cosine scale: calibrate --tau for it "
        f"(e.g. a sweep grid over tau)"
    )


def validate(cfg) -> None:
    """Checks before a run starts: groups and schedule as GroupDebate (``--similarity`` is
    checked with the other options, :data:`SIMILARITY`); warns about ``--tau`` left at the
    paper's value with another embedder (:func:`tau_warning`)."""
    _validate_groups(cfg)
    warning = tau_warning(cfg)
    if warning and cfg.option(EMBEDDING_MODEL) not in _TAU_WARNED:
        _TAU_WARNED.add(cfg.option(EMBEDDING_MODEL))
        log.warning(warning)


def summary_answer(extracted: str | None, sources: Sequence[int], answers: Sequence[str | None]) -> str | None:
    """A group summary's answer: the one extracted from it, but only when its source replies all
    agree on one valid answer; else None. Our choice, where the paper is silent: a summary that
    lists divergent answers ("(18) (20)") would otherwise be read as its last number, and the
    answer-mode early stop (Alg. 1 lines 46-47) could end the debate while agents still disagree
    (None is similar to nothing)."""
    found = {answers[i] for i in sources}
    return extracted if len(found) == 1 and None not in found else None


def mates_read(group_size: int, density: float) -> int:
    """k_j: how many mates an agent of a group of ``group_size`` reads in an intra-group round
    under ``--group-density`` (max(1, round(D (n_j - 1))); all at D = 1; none when alone)."""
    others = group_size - 1
    if others <= 0:
        return 0
    return others if density >= 1 else max(1, round(density * others))


def intra_mates(groups, agent: int, density: float) -> list[int]:
    """The mates ``agent`` reads in an intra-group round under ``--group-density`` (see the module
    docstring): the next k_j (:func:`mates_read`) members after it in its group, cyclically; all
    mates at 1."""
    if density >= 1:
        return groups.mates(agent)
    members = groups.members[groups.group_of(agent)]
    at = members.index(agent)
    return sorted(members[(at + step) % len(members)] for step in range(1, mates_read(len(members), density) + 1))


def _similar(cfg, texts: list[str], answers: list[str | None]):
    """Similarity Calculation Module: a boolean matrix over the given views."""
    if cfg.option(SIMILARITY) == "embedding":
        cos = yield Similarity(list(texts))
        return similar_by_cosine(cos, cfg.option(TAU))
    if cfg.option(SIMILARITY) != "answer":
        raise ValueError(f"--similarity {cfg.option(SIMILARITY)!r} is not one of answer, embedding")
    return similar_by_answer(answers)


def s2mad(ctx: Context) -> ProtocolGen:
    """S2-MAD, Alg. 1 of the paper's appendix A (see the module docstring)."""
    cfg, n = ctx.cfg, ctx.n_agents
    use_filter = bool(cfg.option(FILTER))
    groups = run_groups(ctx)
    n_groups = groups.n_groups
    plan = stage_plan(ctx.n_rounds, cfg.option(STAGE_ROUNDS))
    texts: list[str] = [""] * n
    answers: list[str | None] = [None] * n
    history: list[list[str | None]] = []
    skipped = 0
    skipped_by_round: list[list[int]] = []
    pool: list[tuple[str, str | None, list[int]]] = []  # group summaries: text, answer, sources
    pool_sim: Matrix = np.zeros((0, 0), dtype=bool)  # similarity over agents 0..n-1 and summaries n..n+N-1
    summary_answers: list[list[str | None]] = []
    stopped = False
    shared = SharedBoards(n_groups, MEMORY) if is_shared(cfg) else None

    for rp in plan:
        calls: list[AgentCall] = []
        silent: list[int] = []
        if rp.kind == "first":  # initial response generation, Alg. 1 lines 12-15
            calls = [AgentCall(agent=i, stage="first", memory=MEMORY) for i in range(n)]
        elif shared is not None:  # --prompt-layout shared: who speaks as below, shown one board
            calls, silent = yield from _shared_round(cfg, rp, groups, shared, texts, answers, pool, pool_sim)
        elif rp.kind == "intra":  # Alg. 1 lines 24-29, then 31-34
            sim = yield from _similar(cfg, texts, answers)
            for i in range(n):
                mates = intra_mates(groups, i, cfg.option(GROUP_DENSITY))
                d = len(differing(i, mates, sim))  # eq. 1
                if not participates(d) and cfg.option(JUMP):  # eq. 2: nothing new -> stay silent
                    silent.append(i)
                    continue
                read = redundancy_filter(i, mates, sim) if use_filter else mates
                if not read:  # --no-jump with nothing new to read: a redundant check
                    calls.append(AgentCall(agent=i, stage="self_check", memory=MEMORY))
                    continue
                calls.append(
                    AgentCall(
                        agent=i,
                        stage="s2_intra" if use_filter else "gd_intra",
                        peers=read,
                        peer_texts=list(zip(read, map(texts.__getitem__, read))),
                        peer_answers=list(map(answers.__getitem__, read)),
                        memory=MEMORY,
                    )
                )
        else:  # inter-group round, Alg. 1 lines 18-23, then 31-34
            summary_ids = [n + j for j in range(n_groups)]
            visible = dedup(summary_ids, pool_sim) if use_filter else summary_ids  # Sum <- F(Sum)
            for i in range(n):
                diff = differing(i, visible, pool_sim)  # eq. 1 (over the pool the agent is given)
                if not participates(len(diff)) and cfg.option(JUMP):
                    silent.append(i)
                    continue
                if use_filter and not diff:  # --no-jump with nothing new to read
                    calls.append(AgentCall(agent=i, stage="self_check", memory=MEMORY))
                elif use_filter:
                    read = [k - n for k in diff]
                    calls.append(
                        AgentCall(
                            agent=i,
                            stage="s2_inter",
                            peers=_sources(pool, read, i),
                            values={"summaries": group_block([pool[j][0] for j in read])},
                            peer_answers=[pool[j][1] for j in read],
                            memory=MEMORY,
                            summaries=read,
                        )
                    )
                else:  # w/o filter: GD's inter-group prompt with all N summaries
                    own = groups.group_of(i)
                    others = [j for j in range(n_groups) if j != own]
                    calls.append(
                        AgentCall(
                            agent=i,
                            stage="gd_inter",
                            peers=_sources(pool, list(range(n_groups)), i),
                            values={
                                "own_summary": pool[own][0],
                                "other_summaries": group_block([pool[j][0] for j in others])
                                if others
                                else NO_OTHER_GROUPS,
                            },
                            peer_answers=[pool[own][1]] + [pool[j][1] for j in others],
                            memory=MEMORY,
                            summaries=[own, *others],
                        )
                    )

        if calls:
            replies = yield Step(rp.round, in_groups(calls, groups))
            for call, reply in zip(calls, replies):
                texts[call.agent] = reply.shown_text
                answers[call.agent] = reply.answer
        skipped += len(silent)
        skipped_by_round.append(silent)
        history.append(list(answers))

        if rp.summarize_after:  # end of a stage that is not the last: Alg. 1 lines 39-45
            members = [list(g) for g in groups.members]
            if use_filter:  # summarise the group's unique replies (sec. 4.1, Table 5)
                sim = yield from _similar(cfg, texts, answers)
                members = [dedup(list(g), sim) for g in groups.members]
            scalls = summary_calls(groups, texts, answers, "s2_summary" if use_filter else "gd_summary", members)
            sreplies = yield Step(rp.round, scalls if shared is None else on_boards(scalls, rp.round, texts))
            pool = [(r.shown_text, summary_answer(r.answer, m, answers), m) for r, m in zip(sreplies, members)]
            summary_answers.append([p[1] for p in pool])
            pool_sim = yield from _similar(cfg, texts + [p[0] for p in pool], answers + [p[1] for p in pool])
            # Alg. 1 lines 46-47: stop when the filtered pool holds a single summary (2+ groups)
            if cfg.option(EARLY_STOP) and n_groups >= 2 and all_similar([n + j for j in range(n_groups)], pool_sim):
                stopped = True
                break

    return Outcome(
        final_answer=vote(ctx, answers),  # Alg. 1 line 51: VOTE over every agent's latest answer
        answers_by_round=history,
        stopped_early=stopped,
        skipped_turns=skipped,
        info={
            "groups": [list(g) for g in groups.members],
            "stage_rounds": cfg.option(STAGE_ROUNDS),
            "stages": n_stages(ctx.n_rounds, cfg.option(STAGE_ROUNDS)),
            "skipped_by_round": skipped_by_round,
            "summary_answers": summary_answers,
            "similarity": cfg.option(SIMILARITY),
            "filter": use_filter,
            "jump": bool(cfg.option(JUMP)),
        },
    )


def _shared_round(
    cfg,
    rp,
    groups,
    shared: SharedBoards,
    texts: list[str],
    answers: list[str | None],
    pool: list[tuple[str, str | None, list[int]]],
    pool_sim: Matrix,
):
    """A debate round under ``--prompt-layout shared``: the same agents speak as in the paper
    layout (eqs. 1-2, ``--no-jump``), but every speaker of a group is shown one board -- in an
    intra round the group's unique replies (:func:`topologies.groups.dedup`: of similar replies
    the first in id order; ``--no-filter``: every member), in an inter round the summaries left
    by ``Sum <- F(Sum)`` (all with ``--no-filter``), its own view among them. Returns the calls
    and the silent agents."""
    n, use_filter = len(texts), bool(cfg.option(FILTER))
    stages = ("s2_intra", "s2_inter") if use_filter else ("gd_intra", "gd_inter")
    if rp.kind == "intra":
        sim = yield from _similar(cfg, texts, answers)
        views = [groups.mates(i) for i in range(n)]
        shown = [dedup(list(g), sim) if use_filter else list(g) for g in groups.members]
    else:
        summary_ids = [n + j for j in range(groups.n_groups)]
        sim = pool_sim
        visible = dedup(summary_ids, pool_sim) if use_filter else summary_ids
        views = [visible] * n
    speaking = [i for i in range(n) if participates(len(differing(i, views[i], sim))) or not cfg.option(JUMP)]
    heard = set(speaking)
    silent = [i for i in range(n) if i not in heard]
    if rp.kind == "intra":
        return shared.intra(rp.round, groups, shown, texts, answers, speaking, stages[0]), silent
    read = [k - n for k in visible]
    summaries = [(j, pool[j][0], pool[j][1]) for j in read]
    return shared.inter(
        rp.round, groups, summaries, _summarised(tuple(tuple(pool[j][2]) for j in read)), speaking, stages[1]
    ), silent


def _sources(pool: list[tuple[str, str | None, list[int]]], read: list[int], agent: int) -> list[int]:
    """Agents whose replies went into the summaries ``read`` (minus the reader: no self-loops)."""
    return [a for a in _summarised(tuple(tuple(pool[j][2]) for j in read)) if a != agent]


@functools.lru_cache(maxsize=256)
def _summarised(sources: tuple[tuple[int, ...], ...]) -> list[int]:
    """The sorted union of the summaries' sources (the same few sets for every agent of a round)."""
    return sorted({a for src in sources for a in src})


# ---------------------------------------------------------------------------
# token-cost equations (sec. 3.3 and appendix B, Alg. 2)
# ---------------------------------------------------------------------------

# --------------------------------------------------------------------------- cost model
# closed forms described in engine.cost_model's docstring


@dataclass(frozen=True)
class S2Decisions:
    """What an S2-MAD run decided for one question (eqs. 1-2, the filter and the early stop).

    views:      per round run (0-based, ``rounds_run`` of them), the number of views each
                *speaking* agent read (group mates' replies in an intra round, summaries in an
                inter round); round 0 lists the N first answers (their counts are ignored). An
                agent that sat the round out is simply absent.
    summaries:  per summary step, the number of replies each group's summary read.
    returning:  the agents that speak in some round after round 0 (each finds its round-0 reply
                cached after its first prompt when it next speaks); None: those of round 1, a
                lower count, so the computed prefill stays a bound.
    """

    views: tuple[tuple[int, ...], ...]
    summaries: tuple[tuple[int, ...], ...]
    returning: int | None = None

    @property
    def replies_cached(self) -> int:
        """Later calls whose agent's previous reply is cached after its previous prompt."""
        if self.returning is not None:
            return self.returning
        return len(self.views[1]) if len(self.views) > 1 else 0

    @property
    def rounds_run(self) -> int:
        return len(self.views)

    @property
    def skipped(self) -> int:
        n = len(self.views[0]) if self.views else 0
        return sum(n - len(v) for v in self.views)


def predict_s2mad(
    s: Sizes,
    n_agents: int,
    rounds: int,
    question_tokens: float,
    reply_tokens: float,
    decisions: S2Decisions,
    stage_rounds: int = 2,
    filter: bool = True,
    n_models: int = 1,
) -> Cost:
    """S2-MAD's exact cost given the run's decisions (see the module docstring). Its computed
    prefill: round 0 once per model, each later call all but its first prompt (memory "last":
    :func:`~engine.cost_model.turn_computed`) and, at each agent's first later call, its round-0
    reply (``decisions.replies_cached``), each summary all but its stage's lead (groups are
    disjoint).

    A speaking call that reads no view (``--no-jump``, nothing new) is a self-check:
    ``H + f + a4 + Q``. ``filter=False`` (the "w/o Filter" ablation) uses GroupDebate's prompts; its inter-group calls
    show all G summaries (own + others), so they take ``len(decisions.summaries[-1])`` as G.
    """
    q, c = question_tokens, reply_tokens
    names = ("s2_intra", "s2_summary", "s2_inter") if filter else ("gd_intra", "gd_summary", "gd_inter")
    check = s.f + s.a4 + question_tokens
    intra, summ, inter = s.need(*names)
    h = last_memory_call(s, q, c)
    plan = stage_plan(rounds, stage_rounds)
    if decisions.rounds_run > rounds:
        raise ValueError(f"decisions cover {decisions.rounds_run} rounds, the run has {rounds}")
    prompt, calls, made = 0.0, 0, 0
    shared = 0.0  # what the prefix cache serves: B of every later call, header + lead of every summary
    for rp, views in zip(plan, decisions.views):
        calls += len(views)
        shared += len(views) * first_call(s, q)
        if rp.kind == "first":
            prompt += len(views) * first_call(s, q)
            shared -= max(1, min(n_models, len(views))) * first_computed(s, q)
        elif rp.kind == "intra":  # v = 0: a --no-jump agent with nothing to read self-checks
            prompt += sum(h + s.f + intra.tokens(q) + intra.views * v * (s.a3 + c) if v else h + check for v in views)
        elif filter:
            prompt += sum(
                h + s.f + inter.tokens(q) + inter.views * v * (s.block + c) if v else h + check for v in views
            )
        else:  # GD's inter prompt: own summary + the G-1 others
            n_groups = len(decisions.summaries[made - 1])
            others = (n_groups - 1) * (s.block + c) if n_groups > 1 else s.no_other
            prompt += len(views) * (h + s.f + inter.tokens(q) + inter.extra * c + inter.views * others)
        if rp.summarize_after and made == len(decisions.summaries) and rp.round < decisions.rounds_run - 1:
            raise ValueError(f"round {rp.round} ends a stage and the run went on, but no summary step is given for it")
        if rp.summarize_after and made < len(decisions.summaries):
            texts = decisions.summaries[made]
            prompt += sum(s.g + s.f + summ.tokens(q) + summ.views * m * (s.a3 + c) for m in texts)
            shared += len(texts) * (header(s) + summ.lead)
            calls += len(texts)
            made += 1
    if made != len(decisions.summaries):
        raise ValueError(
            f"{len(decisions.summaries)} summary steps given, the schedule of {decisions.rounds_run} rounds has {made}"
        )
    shared += c * decisions.replies_cached  # memory "last": only an agent's first later call
    once = summary_head(s, summ) if decisions.summaries else 0.0
    return Cost(prompt, calls * c, calls, prompt - shared, computed_per_run=once)


def s2mad_bound(
    s: Sizes,
    n_agents: int,
    rounds: int,
    question_tokens: float,
    reply_tokens: float,
    groups: Any = None,
    stage_rounds: int = 2,
    filter: bool = True,
    jump: bool = True,
    group_density: float = 1.0,
    n_models: int = 1,
) -> Cost:
    """S2-MAD's upper bound: nobody skips (except agents alone in a group, whose D_i is always 0;
    with ``jump=False`` they self-check), nothing is deduplicated, no early stop — every group's
    summary reads the whole group and every inter-group call reads all G summaries; an intra call
    reads k_j mates (``group_density``, :func:`engine.protocols.s2mad.intra_mates`)."""
    sizes = parse_group_sizes(groups, n_agents)
    member_views = [
        mates_read(m, group_density) for m in sizes for _ in range(m) if m > 1 or not jump
    ]  # intra speakers
    views, summaries = [], []
    plan = stage_plan(rounds, stage_rounds)
    returning = n_agents if any(rp.kind == "inter" for rp in plan) else len(member_views) if rounds > 1 else 0
    for rp in plan:
        if rp.kind == "first":
            views.append(tuple([0] * n_agents))
        elif rp.kind == "intra":
            views.append(tuple(member_views))
        else:
            views.append(tuple([len(sizes)] * n_agents))
        if rp.summarize_after:
            summaries.append(tuple(sizes))
    return predict_s2mad(
        s,
        n_agents,
        rounds,
        question_tokens,
        reply_tokens,
        S2Decisions(tuple(views), tuple(summaries), returning),
        stage_rounds,
        filter,
        n_models,
    )


def shared_s2mad_bound(
    s: Sizes,
    n_agents: int,
    rounds: int,
    question_tokens: float,
    reply_tokens: float,
    groups: Any = None,
    stage_rounds: int = 2,
    filter: bool = True,
    jump: bool = True,
    n_models: int = 1,
) -> Cost:
    """S2-MAD under ``--prompt-layout shared``, the upper bound of :func:`s2mad_bound` (nobody
    skips but agents alone in a group, nothing deduplicated, no early stop): an intra speaker of
    group j is sent ``B + board(n_j replies) + turn``, an inter speaker ``B + board(G summaries)
    + turn`` (memory "last": one board), a summary call shows its group's board."""
    (summ,) = s.need("s2_summary" if filter else "gd_summary")
    sizes = parse_group_sizes(groups, n_agents)
    q, c = question_tokens, reply_tokens
    prompt, calls = n_agents * first_call(s, q), float(n_agents)
    plan = stage_plan(rounds, stage_rounds)
    for rp in plan:
        if rp.kind == "intra":
            speakers = [m for m in sizes if m > 1 or not jump]
            prompt += sum(m * shared_prompt(s, q, board_tokens(s, q, c, m), group=True) for m in speakers)
            calls += sum(speakers)
        elif rp.kind == "inter":
            prompt += n_agents * shared_prompt(s, q, board_tokens(s, q, c, len(sizes), "group"), group=True)
            calls += n_agents
        if rp.summarize_after:
            prompt += sum(board_summary_call(s, summ, q, c, m) for m in sizes)
            calls += len(sizes)
    speaking = [(m, m if m > 1 or not jump else 0) for m in sizes]
    computed = shared_groups_computed(s, q, c, summ, plan, speaking, MEMORY)
    once = shared_summary_head(s, summ, len(sizes)) if any(rp.summarize_after for rp in plan) else 0.0
    return Cost(prompt, calls * c, calls, computed, "bound" if n_models == 1 else "estimate", once)


_S2_INTER = ("s2_inter", "gd_inter")

_S2_INTRA = ("s2_intra", "gd_intra")


def s2_decisions_from_records(records: Sequence[Any], n_agents: int, rounds_run: int) -> S2Decisions:
    """The decisions of one S2-MAD question from its call records (``DebateLog.records``).

    Intra-group calls: views = ``len(peers)``. Summary calls (``agent_id == -1``): texts =
    ``len(peers)`` (the recorded sources). Inter-group calls record as ``peers`` the union of the
    sources of the summaries read, minus the reader, and sources of different groups are disjoint,
    so a summary was read iff its sources (minus the reader) meet ``peers``. This misses a summary
    whose only source is the reader itself; with answer similarity that summary carries the
    reader's own answer and is never read unless that answer is unparseable (None), so callers
    must make sure no answer is None (the test runs with ``invalid=0``).
    """
    views: list[list[int]] = [[] for _ in range(rounds_run)]
    steps: list[tuple[int, list[Any]]] = []  # (round, summary records) in order
    for rec in records:
        if rec.agent_id == -1:
            if not steps or steps[-1][0] != rec.round:
                steps.append((rec.round, []))
            steps[-1][1].append(rec)
            continue
        if rec.kind in _S2_INTRA:
            views[rec.round].append(len(rec.peers))
        elif rec.kind in _S2_INTER:
            pool = [set(r.peers) - {rec.agent_id} for r in steps[-1][1]]  # the latest summary step
            views[rec.round].append(sum(1 for src in pool if src & set(rec.peers)))
        else:  # "first"
            views[rec.round].append(0)
    returning = len({rec.agent_id for rec in records if rec.agent_id != -1 and rec.round > 0})
    summaries = tuple(tuple(len(r.peers) for r in rs) for _, rs in steps)
    return S2Decisions(tuple(tuple(v) for v in views), summaries, returning)


def s2_differing_count(own: int, candidates: Sequence[int], similar: Matrix) -> int:
    """Eq. 1: ``D_i^t``, the number of views among ``candidates`` (group mates' round t-1
    replies in an intra-group round, the stage's group summaries in an inter-group round) whose
    similarity to agent ``own``'s view is below the threshold, i.e. that are not similar."""
    return len(differing(own, candidates, similar))


def s2_participation(d: int) -> int:
    """Eq. 2: ``P_i^t = 1`` if ``D_i^t > 0`` else ``0``."""
    return int(participates(d))


def s2_intra_round_tokens(
    groups: Sequence[Sequence[int]], q: float, outputs: Sequence[float], prev_outputs: Sequence[float], d: Sequence[int]
) -> float:
    """Eq. 3, one intra-group round:
    ``sum_j sum_{i in G_j} P_i^t (Q + O_i^t + O_i^{t-1} + (D_i^t / |G_j|) sum_{i' in G_j} O_{i'}^{t-1})``.

    Two corrections to the equation as printed, which reads
    ``P_i^t (Q + O_i^t + (M D_i^t / N) sum_{i' in G_j} O_{i'}^{t-1})``:

    * the factor ``M D_i / N`` is taken as ``D_i / K`` (``K = M / N`` the group size; we use the
      actual ``|G_j|``): "``D_i`` views of the group's mean size", the same form as eq. 4's
      ``(D_i / N) sum_j Sum_j``. As printed, 4 agents in 2 groups with one differing mate would
      read ``2 x`` the whole group's output, more than the group wrote.
    * ``O_i^{t-1}``, the agent's own previous reply, is added: Alg. 1 keeps it in the agent's
      context (``H_i[-2]``), and eq. 4 and GroupDebate's eq. 3 count it.

    ``d[i]`` is the number of views agent i reads — with the redundancy filter the *unique*
    differing views (appendix B: "the unique responses from other agents within the same group
    that differ from its own"), which equals eq. 1's ``D_i`` when no two differing views are
    similar to each other. An agent with ``d[i] = 0`` costs nothing (``P_i^t = 0``)."""
    total = 0.0
    for g in groups:
        mean_prev = sum(prev_outputs[k] for k in g) / len(g)
        for i in g:
            total += s2_participation(d[i]) * (q + outputs[i] + prev_outputs[i] + d[i] * mean_prev)
    return total


def s2_inter_round_tokens(
    q: float, outputs: Sequence[float], prev_outputs: Sequence[float], summaries: Sequence[float], d: Sequence[int]
) -> float:
    """Eq. 4, one inter-group round:
    ``sum_i P_i^t (Q + O_i^{t-1} + O_i^t + (D_i^t / N) sum_{j=1..N} Sum_j^{s-1})`` — an agent
    that speaks reads ``D_i`` summaries of the mean summary size."""
    n_groups = len(summaries)
    total_sum = sum(summaries)
    return sum(
        s2_participation(d[i]) * (q + prev_outputs[i] + outputs[i] + d[i] / n_groups * total_sum)
        for i in range(len(outputs))
    )


def s2_summary_tokens(
    read_by_group: Sequence[Sequence[int]], prev_outputs: Sequence[float], summaries: Sequence[float]
) -> float:
    """Summary generation at the end of a stage, Alg. 2 line 7:
    ``sum_j (sum_{i in G_j} O_i^{(s-1)R} + Sum_j^{s-1})``, where — with the redundancy filter —
    ``G_j`` is replaced by the group's unique replies the summary reads (appendix B: "the summary
    generation cost, which comprises the unique responses")."""
    return sum(sum(prev_outputs[i] for i in g) + summaries[j] for j, g in enumerate(read_by_group))


def _cost(
    s,
    n: int,
    rounds: int,
    q: float,
    c: float,
    *,
    groups=None,
    stage_rounds: int = 2,
    filter: bool = True,
    jump: bool = True,
    group_density: float = 1.0,
    prompt_layout: str = "paper",
    n_models: int = 1,
    **_: object,
):
    if prompt_layout == "shared":
        return shared_s2mad_bound(s, n, rounds, q, c, groups, stage_rounds, filter, jump, n_models)
    return s2mad_bound(s, n, rounds, q, c, groups, stage_rounds, filter, jump, group_density, n_models)


def _check(cfg) -> None:
    """``--prompt-layout shared`` needs every member of a group to read the same mates."""
    if cfg.option(PROMPT_LAYOUT) == "shared" and cfg.option(GROUP_DENSITY) < 1:
        raise ConfigError(
            f"--prompt-layout shared needs --group-density 1 (got {cfg.option(GROUP_DENSITY):g}): below it each member "
            "of a group reads different mates, so no board is the same for every reader"
        )


def _label(cfg) -> list[str]:
    return groups_label(cfg) + layout_label(cfg)


SIMILARITY = Option(
    "similarity",
    str,
    "answer",
    "'answer' (extracted answers match) or 'embedding' (cosine >= --tau)",
    choices=("answer", "embedding"),
)
TAU = Option(
    "tau",
    float,
    0.4,
    "cosine similarity threshold: the paper's best, 0.4 on MATH and ~0.1 on GSM8K, "
    "were found with bert-base-uncased vectors; the default --embedding-model (all-MiniLM-L6-v2) has "
    "another cosine scale, so calibrate tau for it (a warning says so when tau is left at 0.4)",
    low=-1.0,
    high=1.0,
)
FILTER = Option("filter", bool, True, "redundancy filter (--no-filter: the paper's ablation)")
JUMP = Option(
    "jump",
    bool,
    True,
    "conditional participation, eqs. 1-2: an agent with no differing view stays "
    "silent (--no-jump: everyone speaks every round, the paper's 'w/o Jump' ablation)",
)
GROUP_DENSITY = Option(
    "group_density",
    float,
    1.0,
    "share of its group mates an agent reads in an intra-group "
    "round (the next ones in group order; the paper's 'w/ Sparse Commu.' row, e.g. 0.5)",
    low=0.0,
    high=1.0,
)

SPEC = ProtocolSpec(
    "s2mad",
    s2mad,
    "S2-MAD: GroupDebate where only agents whose views differ speak, with early stop (Zeng et al.)",
    "S2-MAD",
    settings=(
        GROUPS,
        STAGE_ROUNDS,
        SIMILARITY,
        TAU,
        FILTER,
        JUMP,
        GROUP_DENSITY,
        EARLY_STOP,
        EMBEDDING_MODEL,
        PROMPT_LAYOUT,
    ),
    unused=lambda cfg: set() if cfg.option(SIMILARITY) == "embedding" else {"tau", "embedding_model"},
    check=_check,
    validate=validate,
    stages=S2_STAGES,
    needs_embeddings=lambda cfg: cfg.option(SIMILARITY) == "embedding",
    cost=_cost,
    cost_kind="bound",
    label_parts=_label,
    example="--agents 4 --rounds 3 --groups 2+2 --similarity embedding --tau 0.4",
)


__all__ = [
    "FILTER",
    "S2_STAGES",
    "SIMILARITY",
    "SPEC",
    "TAU",
    "s2mad",
    "validate",
]
