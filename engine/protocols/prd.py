"""Peer Review Debate (PRD): Xu et al., "Towards Reasoning in Large Language Models via
Multi-Agent Peer Review Collaboration" (arXiv 2311.08152, 2023), as CortexDebate runs it as a
baseline (its appendix F, "Peer Review Debate", prompts in Figure 9).

The paper's three steps, then repeated and voted as in CortexDebate's baseline:

1. **Create** (round 0): every agent answers the question on its own (Figure 9 "Initial Answer
   Generation": the engine's ``first`` stage, whose numeric wording is Figure 9's with the task's
   ``$format``).
2. **Review** (round r >= 1): every agent reviews every other agent's current solution, one call
   per (reviewer, reviewed) pair — n(n-1) calls (Figure 9 "Peer Review", stage ``prd_review``: the
   reviewed solution, step-by-step feedback on its reasoning and a 1-10 confidence in the
   feedback). A review is a *side call* (:attr:`~engine.protocols.base.AgentCall.side`): recorded
   with ``agent_id`` = the reviewer, ``peers`` = [the reviewed agent], ``kind = "prd_review"``; it
   is not one of the reviewer's turns (it does not join its transcript or change its answer).
3. **Revise** (same round r): every agent reads the feedback it received, each with the
   reviewer's stated confidence, and the other agents' solutions, and answers again (Figure 9
   "Answer Revise", stage ``prd_revise``) — n calls.

Steps 2-3 repeat for ``--rounds - 1`` rounds; the answer is the majority vote of the last round
(:func:`~engine.protocols.base.vote`). There is no early stop (neither the paper nor Figure 9 has
one). ``Outcome.info["review_confidence"]`` holds, per round, the confidence every reviewer
stated (``[reviewer][reviewed]``, 1-10, :func:`~engine.protocols.cortex.parse_score`; None when
unreadable, listed in ``info["unparsed_review_confidence"]`` as ``[round, reviewer, reviewed]``).

Memory, from the authors' code (github.com/HITsz-TMG/Multi-agent-peer-review, ``peer_review.py``:
one chat per agent that every call of the agent appends to):

* the reviewer sees its own transcript — the question, its own solution (and in later rounds its
  revisions) — before the review request, so it reviews with its own solution in mind;
* the reviser sees its whole transcript too; Figure 9's revise prompt says "Using other agents'
  solutions and feedbacks", and in the authors' code the other solutions are in the reviser's
  context because its own review requests (which quote them) are in its chat.

Choices where the paper is vague (or where we differ from the authors' code):

* **Reviews are side calls.** In the authors' code an agent writes its n-1 reviews one after the
  other in its own chat (review k sees reviews 1..k-1) and they stay in the chat for the revision.
  Here the reviews of one round run concurrently, each reads the reviewer's transcript without its
  other reviews, and none joins the transcript. What the code's reviser had from them — the other
  agents' solutions — is shown explicitly in the revise prompt (``$peers``, the engine's ``peer``
  rendering, before the feedback); its own review texts are not shown again.
* **Confidence** is shown as the reviewer stated it, inside its feedback (the paper and code pass
  the feedback text verbatim); nothing is re-weighted by it. Feedbacks are listed in reviewer-id
  order (:func:`feedback_block`); a review that failed is left out of what the reviewed agent reads.
* **Task wording.** Figure 9 says "math problem" and gives a ``\\boxed{}`` format; the revise prompt
  says "problem" and ends with the task's ``$format``, so every task of the engine works.
  The authors' code has a second revise instruction for its multiple-choice (AQuA, ARC-c, ...)
  and yes/no (StrategyQA) tasks: "Using the reasoning from other agents as additional advice, can
  you give an updated answer? Examine your solution and other agents' feedback step by step. Put
  your answer in the form (X) at the end of your response." -- no restated question. We keep
  Figure 9's (the numeric one) for every task, so a task changes only ``$format``; the code's
  wording is one per-task override away (``prompts: {choice: {prd_revise: ...}}``, keeping
  ``$peers`` and ``$feedbacks``).
* **Several rounds.** The paper runs one review-revise cycle (its code: ``rounds = 3`` calls per
  agent: create, review, revise); ``--rounds T`` runs T-1 cycles, each reviewing the latest
  solutions with the transcript grown by the earlier revisions (CortexDebate runs PRD for as many
  rounds as its other baselines).
* **Failed calls.** A failed revision leaves the agent without an answer that round (as in MAD);
  its shown text is empty. The question is marked errored either way (:mod:`engine.debate`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from engine.confidence import CONFIDENCE_KEYWORD, parse_score
from engine.cost_model import Cost, Sizes, sys_tokens
from engine.options import ConfigError
from engine.protocols.base import (
    AgentCall,
    Context,
    Outcome,
    ProtocolGen,
    Reply,
    Step,
    judge_every_other,
    read_judgements,
    vote,
)
from engine.protocols.spec import ProtocolSpec
from topologies import make_topology

log = logging.getLogger(__name__)

STAGES = {
    # Figure 9, "Peer Review" (the reviewer's transcript, with the question, comes before it)
    "prd_review": (
        "Here is a solution from another agent:\n$solution\n"
        "Please examine this agent's reasoning process step by step and offer feedback on its reasoning. "
        "You can rate your confidence in your feedback on a scale from 1-10, where 10 indicates the highest "
        "level of confidence."
    ),
    # Figure 9, "Answer Revise", with the other agents' solutions shown (module docstring)
    "prd_revise": (
        "These are the solutions to the problem from other agents:\n$peers\n"
        "Here are the feedbacks for your solution from other agents:\n$feedbacks\n"
        "Using other agents' solutions and feedbacks as additional information, can you provide your answer "
        "to the problem?\nThe original problem is: $question\n$format"
    ),
}


def feedback_block(feedbacks: Sequence[str]) -> str:
    """How the feedbacks an agent received are listed in its revise prompt (Figure 9's
    "One agent feedback: ..."), one per reviewer."""
    return "".join(f"\nOne agent feedback: ```{text}```\n" for text in feedbacks)


def _revise(i: int, n: int, texts: list[str], answers: list[str | None], received: list[Reply]) -> AgentCall:
    """Agent i revises, reading the others' solutions and the feedbacks ``received`` (reviewer order)."""
    others = [j for j in range(n) if j != i]
    return AgentCall(
        agent=i,
        stage="prd_revise",
        peers=others,
        peer_texts=[(j, texts[j]) for j in others],
        peer_answers=[answers[j] for j in others],
        values={"feedbacks": feedback_block([r.text for r in received if r.error is None])},
    )


def prd(ctx: Context) -> ProtocolGen:
    n, n_rounds = ctx.n_agents, ctx.n_rounds
    replies = yield Step(0, [AgentCall(agent=i, stage="first") for i in range(n)])  # 1. create
    texts = [r.shown_text for r in replies]
    answers = [r.answer for r in replies]
    history = [answers]
    info: dict[str, Any] = {"review_confidence": [], "unparsed_review_confidence": []}
    for t in range(1, n_rounds):
        # 2. review: each on the reviewer's transcript, in the authors' order (reviewer-major)
        calls = judge_every_other("prd_review", texts, answers, memory="full")
        reviews = yield Step(t, calls)
        received: list[list[Reply]] = [[] for _ in range(n)]  # the reviews of each agent, reviewer order
        for call, rev in zip(calls, reviews):
            received[call.peers[0]].append(rev)
        confidence = read_judgements(calls, reviews, lambda text: parse_score(text, CONFIDENCE_KEYWORD))
        info["review_confidence"].append(confidence.given)
        info["unparsed_review_confidence"].extend([t, *pair] for pair in confidence.unread)
        if confidence.unread:
            log.debug(
                "prd %s round %d: %d of %d review confidences unreadable",
                ctx.question.qid,
                t,
                len(confidence.unread),
                len(calls),
            )
        replies = yield Step(t, [_revise(i, n, texts, answers, received[i]) for i in range(n)])  # 3. revise
        texts = [r.shown_text for r in replies]
        answers = [r.answer for r in replies]
        history.append(answers)
    return Outcome(final_answer=vote(ctx, answers), answers_by_round=history, info=info)


# --------------------------------------------------------------------------- spec


def _check(cfg) -> None:
    if cfg.experiment.agents < 2:
        raise ConfigError(f"--protocol prd needs --agents >= 2: agents review each other (got {cfg.experiment.agents})")


def _topology(cfg):
    return make_topology("full", cfg.n_agents)  # every agent reviews and reads every other


# --------------------------------------------------------------------------- cost model
# closed forms described in engine.cost_model's docstring


def prd_cost(s: Sizes, n_agents: int, rounds: int, question_tokens: float, reply_tokens: float) -> Cost:
    """Peer Review Debate, exact (see the module docstring): round 0, then per round N(N-1)
    reviews and N revisions, every call on the agent's whole transcript."""
    review, revise = s.need("prd_review", "prd_revise")
    n, q, c = n_agents, question_tokens, reply_tokens
    head = s.g + sys_tokens(s)
    first_msg = s.f + s.a1 + q
    review_msg = s.f + review.tokens(q) + review.extra * c
    revise_msg = (
        s.f + revise.tokens(q) + revise.views * (n - 1) * (s.a3 + c) + revise.extra * (n - 1) * (s.feedback + c)
    )
    prompt = n * (head + first_msg)
    transcript = first_msg + s.f + c  # one agent's, after round 0
    for _ in range(1, rounds):
        prompt += n * (n - 1) * (head + transcript + review_msg) + n * (head + transcript + revise_msg)
        transcript += revise_msg + s.f + c
    calls = n + (rounds - 1) * n * n
    return Cost(prompt_tokens=prompt, completion_tokens=calls * c, calls=calls)


def _cost(s, n: int, rounds: int, q: float, c: float, **_: object):
    """Exact: the call structure does not depend on the answers (:func:`prd_cost`)."""

    return prd_cost(s, n, rounds, q, c)


SPEC = ProtocolSpec(
    "prd",
    prd,
    "Peer Review Debate: agents review each other's solutions with a confidence, then revise (Xu et al. 2023)",
    "PRD",
    check=_check,
    stages=STAGES,
    topology=_topology,
    cost=_cost,
    example="--agents 3 --rounds 2",
)

__all__ = ["SPEC", "STAGES", "feedback_block", "prd"]
