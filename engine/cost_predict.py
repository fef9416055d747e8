"""The cost model's front door: measure the constants, predict a protocol's tokens.

:func:`measure` renders the prompt templates (base stages and every protocol's) with the
protocols' own block helpers to get the :class:`~engine.cost_model.Sizes` constants;
:func:`predict` calls the protocol spec's ``cost`` function. The formulas are in
:mod:`engine.cost_model`'s docstring and the protocol modules. This module sits above the
protocol registry; the protocols import only the shared pieces of :mod:`engine.cost_model`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import replace
from string import Template
from typing import Any

from engine.cost_model import ChatStage, ContentCounter, Cost, NotCovered, ReconcileBlock, SharedSizes, Sizes, Stage
from engine.prompts import SEPARATOR, PromptSet
from engine.protocols import protocol_spec
from engine.protocols.chateval import ChatLine, render_history
from engine.protocols.group_debate import NO_OTHER_GROUPS, group_block
from engine.protocols.layout import SUMMARY_LABEL, agent_label, group_label, who
from engine.protocols.prd import feedback_block
from engine.protocols.reconcile import group_header, member_line, unread_header


def _occurrences(template: str, name: str) -> int:
    """How often ``$name`` / ``${name}`` occurs in a string.Template text."""
    return sum(1 for m in Template.pattern.finditer(template) if (m.group("named") or m.group("braced")) == name)


def _measure_stage(
    prompts: PromptSet,
    stage: str,
    content_tokens: ContentCounter,
    view: str | None,
    view_value: str,
    extra: str | None = None,
    extra_value: str = "x",
) -> Stage | None:
    """Render ``stage`` with "x" for the question, ``view_value`` for the list placeholder ``view``
    and ``extra_value`` ("x": one reply; or a second list's block) for ``extra``, then take off what
    was inserted (each counted as often as it occurs)."""
    if stage not in prompts.templates:
        return None
    tpl = prompts.templates[stage]
    x = "x"
    values: dict[str, str] = {"question": x, "peers": ""}
    if view is not None:
        values[view] = view_value
    if extra is not None:
        values[extra] = extra_value
    nq = _occurrences(tpl, "question")
    nv = _occurrences(tpl, view) if view is not None else 0
    ne = _occurrences(tpl, extra) if extra is not None else 0
    inserted = nq * content_tokens(x) + nv * content_tokens(view_value) + ne * content_tokens(extra_value)
    const = content_tokens(prompts.render(stage, **values)) - inserted
    return Stage(const=const, q=nq, views=nv, extra=ne)


def _lead(a: str, b: str, content_tokens: ContentCounter) -> int:
    """Content tokens of the longest start two texts share, cut back to its last whitespace (a
    word that runs on into where they part is not shared): where two prompts' tokens part."""
    same = os.path.commonprefix([a, b])
    if a == b:
        return content_tokens(a)
    head = re.match(r"(?s).*\s", same)
    return content_tokens(head.group(0)) if head else 0


def _with_leads(prompts: PromptSet, stage: Stage | None, name: str, content_tokens: ContentCounter) -> Stage | None:
    """A summary stage with its leads (:attr:`Stage.lead`, :attr:`Stage.board_lead`): two calls
    rendered with different questions and texts, their entries as "peer" blocks or board entries."""
    if stage is None:
        return None

    def lead(block: Callable[[list[tuple[Any, str]]], str], label: Any) -> int:
        x, y = (prompts.render(name, question=t, peers=block([(label, t)])) for t in ("x", "y"))
        return _lead(x, y, content_tokens)

    return replace(stage, lead=lead(prompts.peers_block, 0), board_lead=lead(prompts.entries_block, agent_label(0)))


def _measure_chat_stage(prompts: PromptSet, stage: str, content_tokens: ContentCounter) -> ChatStage | None:
    """Render a ChatEval stage with "x" for every placeholder it takes (a history is whole lines:
    "x" and a newline), then take them off."""
    if stage not in prompts.templates:
        return None
    tpl = prompts.templates[stage]
    counts = {name: _occurrences(tpl, name) for name in ("question", "name", "role", "history")}
    text = prompts.render(stage, question="x", name="x", role="x", history="x\n", peers="")
    const = (
        content_tokens(text)
        - (counts["question"] + counts["name"] + counts["role"]) * content_tokens("x")
        - counts["history"] * content_tokens("x\n")
    )
    return ChatStage(
        const=const, q=counts["question"], name=counts["name"], role=counts["role"], history=counts["history"]
    )


def _measure_shared(prompts: PromptSet, content_tokens: ContentCounter) -> SharedSizes:
    """``--prompt-layout shared``'s pieces (:class:`~engine.cost_model.SharedSizes`): each stage
    rendered with "x" for the question and a one-token round (a board with no entries), the
    reader's part with each kind of ``$who``; an entry with the text "x", less it."""
    x = "x"
    qx = content_tokens(x)

    def stage(name: str, **values: str) -> Stage:
        nq = _occurrences(prompts.templates[name], "question")
        return Stage(const=content_tokens(prompts.render(name, question=x, **values)) - nq * qx, q=nq)

    def entry(label: str) -> int:
        return content_tokens(prompts.entries_block([(label, x)])) - qx

    def lead(a: str, b: str) -> int:
        return _lead(a, b, content_tokens)

    def board(name: str, round_: str) -> str:
        return prompts.render(name, question=x, round=round_, entries="")

    def entries(label: str, text: str = x) -> str:
        return prompts.entries_block([(label, text)])

    def turn(who_: dict[str, str]) -> str:
        return prompts.render("shared_turn", question=x, **who_)

    return SharedSizes(
        board=stage("shared_board", round="0", entries=""),
        summaries=stage("shared_summaries", round="0", entries=""),
        turn=stage("shared_turn", **who(0)),
        group_turn=stage("shared_turn", **who(0, 0)),
        agent_entry=entry(agent_label(0)),
        group_entry=entry(group_label(0)),
        summary_entry=entry(SUMMARY_LABEL),
        sep=content_tokens(x + SEPARATOR + x) - 2 * qx,
        board_round_lead=lead(board("shared_board", "0"), board("shared_board", "1")),
        summaries_round_lead=lead(board("shared_summaries", "0"), board("shared_summaries", "1")),
        stages_lead=lead(board("shared_board", "0"), board("shared_summaries", "0")),
        agent_label_lead=lead(entries(agent_label(0)), entries(agent_label(1))),
        group_label_lead=lead(entries(group_label(0)), entries(group_label(1))),
        agent_text_lead=lead(entries(agent_label(0)), entries(agent_label(0), "y")),
        group_text_lead=lead(entries(group_label(0)), entries(group_label(0), "y")),
        summary_text_lead=lead(entries(SUMMARY_LABEL), entries(SUMMARY_LABEL, "y")),
        turn_lead=lead(turn(who(0)), turn(who(1))),
        group_turn_lead=lead(turn(who(0, 0)), turn(who(1, 0))),
    )


def measure(
    prompts: PromptSet,
    content_tokens: ContentCounter,
    chat_tokens: Callable[[list[dict]], int],
    system_prompt: str | None = None,
) -> Sizes:
    """Measure the constants from the templates: contents with an empty question and reply.

    ``content_tokens(text)`` counts a message body; ``chat_tokens(messages)`` counts a whole
    prompt (chat template applied), from which the per-prompt and per-message framing follow.
    Protocol stages (GroupDebate, S2-MAD, CortexDebate, ...) are measured when ``prompts`` has
    them (a PromptSet built by ``PromptSet.for_task`` has every registered protocol's stages);
    their inserted blocks are built with the protocols' own helpers (the "peer" stage,
    ``group_block``).
    """
    system = system_prompt if system_prompt is not None else prompts.system("")  # the task's "system" stage
    one = [{"role": "user", "content": "x"}]
    two = one + [{"role": "assistant", "content": "x"}]
    g_plus_f = chat_tokens(one) - content_tokens("x")
    f = chat_tokens(two) - chat_tokens(one) - content_tokens("x")
    q = "x"
    qx = content_tokens(q)
    a1 = content_tokens(prompts.render("first", question=q)) - qx
    a2 = content_tokens(prompts.render("debate", question=q, peers="")) - qx
    a3 = content_tokens(prompts.peers_block([(0, q)])) - qx
    a4 = content_tokens(prompts.render("self_check", question=q)) - qx

    peers_x = prompts.peers_block([(0, q)])  # one shown reply, as AgentCall / SummaryCall render it
    block_x = group_block([q])  # one summary, as the inter-group rounds list them

    def ms(stage: str, view: str | None, value: str, extra: str | None = None, extra_value: str = q) -> Stage | None:
        return _measure_stage(prompts, stage, content_tokens, view, value, extra, extra_value)

    def summary(stage: str) -> Stage | None:
        return _with_leads(prompts, ms(stage, "peers", peers_x), stage, content_tokens)

    return Sizes(
        g=g_plus_f - f,
        f=f,
        a1=a1,
        a2=a2,
        a3=a3,
        a4=a4,
        system=content_tokens(system) if system else 0,
        gd_intra=ms("gd_intra", "peers", peers_x),
        gd_summary=summary("gd_summary"),
        gd_inter=ms("gd_inter", "other_summaries", block_x, "own_summary"),
        s2_intra=ms("s2_intra", "peers", peers_x),
        s2_summary=summary("s2_summary"),
        s2_inter=ms("s2_inter", "summaries", block_x),
        cortex_first=ms("cortex_first", None, ""),
        cortex_debate=ms("cortex_debate", "peers", peers_x),
        cortex_self_check=ms("cortex_self_check", None, "", "previous"),
        cortex_score=ms("cortex_score", None, "", "solution"),
        prd_review=ms("prd_review", None, "", "solution"),
        prd_revise=ms("prd_revise", "peers", peers_x, "feedbacks", feedback_block([q])),
        mad_summary=summary("mad_summary"),
        mad_summary_debate=ms("mad_summary_debate", None, "", "summary"),
        reconcile_first=ms("reconcile_first", None, "", "samples", ""),  # measured without samples
        reconcile_debate=ms("reconcile_debate", "groups", "", "samples", ""),
        reconcile_block=ReconcileBlock(
            header=content_tokens(group_header(1, q)),
            unread_header=content_tokens(unread_header(1)),
            member=content_tokens(member_line(q, q, 0.5)) - qx,
        ),
        block=content_tokens(block_x) - qx,
        no_other=content_tokens(NO_OTHER_GROUPS),
        chateval_first=_measure_chat_stage(prompts, "chateval_first", content_tokens),
        chateval_turn=_measure_chat_stage(prompts, "chateval_turn", content_tokens),
        chateval_summary=_measure_chat_stage(prompts, "chateval_summary", content_tokens),
        line=content_tokens(render_history([ChatLine(0, q, q, None)])) - 2 * qx,
        content_tokens=content_tokens,
        feedback=content_tokens(feedback_block([q])) - qx,
        shared=_measure_shared(prompts, content_tokens),
        first_lead=_lead(prompts.first("x"), prompts.first("y"), content_tokens),
    )


def predict(
    protocol: str,
    s: Sizes,
    n_agents: int,
    rounds: int,
    question_tokens: float,
    reply_tokens: float,
    density: float | None = None,
    forgetting: bool = False,
    **options: Any,
) -> Cost:
    """Predicted tokens of one question: the protocol spec's ``cost`` with the protocol's options
    as keywords (each cost function takes the ones it uses and ignores the rest).

    MAD family (``cot``, ``sc``, ``mad``, ``sparse``, ``probmad``): ``density``, ``forgetting``.
    ``group`` (exact) and ``s2mad`` (upper bound: no skips, no dedup, no early stop): ``groups``
    (a ``--groups`` spec: "2+3", "2", [2, 3] or None for the default) and ``stage_rounds`` R;
    S2-MAD also ``filter``. ``cortex`` (estimate): every debate round each agent keeps
    ``kept_fraction`` of its N-1 peers, for ``rounds_run`` rounds (default all ``rounds``);
    ``cortex_memory`` (``forgetting`` turns "full" into "last", as the protocol does);
    ``cortex_weights="peer"`` adds the scoring calls. ``prd`` (exact): no options. ``memory``
    (``--memory``) for the MAD family and GroupDebate. ``chateval`` (exact): ``chateval_talk`` and
    ``chateval_roles`` (None for the default personas).
    """
    cost = protocol_spec(protocol).cost
    if cost is None:
        raise NotCovered(f"no cost model for protocol {protocol!r}")
    return cost(s, n_agents, rounds, question_tokens, reply_tokens, density=density, forgetting=forgetting, **options)
