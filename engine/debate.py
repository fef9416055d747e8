"""One question's debate: the driver that runs a protocol, and the log that owns its state.

Pure logic (no Ray, no model). A protocol (:mod:`engine.protocols`) decides what happens;
:func:`debate` drives its generator — each :class:`~engine.protocols.base.Step`'s calls go out
concurrently through a ``call`` hook, each :class:`~engine.protocols.base.Similarity` through a
``similarity`` hook — and :class:`DebateLog` records what did happen: every call, every
information edge of every round and every agent's transcript (agents themselves keep no
memory: each :class:`~engine.records.Turn` carries the agent's history). The coordinator actor
drives questions with Ray-backed hooks; :func:`actors.local_run.run_local` with in-process ones;
both get the same question rows.

Scale. The log keeps what each call read as one entry per call (its round, reader, the list of
agents it read and their weights), never one Python object per edge: a fully connected round of
1,000 agents is 1,000 entries, not 10^6. :meth:`DebateLog.graph_rows` turns entries into the
graphs table's rows (one per call, :mod:`engine.results`) from a given entry on, so streaming a
step costs that step's calls only.

Errors. A call that fails is an error *record* (its question is marked ``errored``: data). A
:class:`~engine.records.ServiceLost` (an agent or the embedder gone for good) ends the question
as an errored row. Any other exception is a bug: it propagates and stops the run.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from engine.extract import answers_equal, majority_vote, tied_answers
from engine.kinds import check_kind
from engine.metrics import QuestionFacts, metric_values
from engine.protocols import get_protocol, protocol_spec
from engine.protocols.base import (
    AgentCall,
    Call,
    Context,
    Outcome,
    Reply,
    Similarity,
    Step,
    consensus,
    effective_rounds,
    summary_node,
    tie_key,
)
from engine.records import CallRecord, Message, Reads, ServiceLost, Turn, TurnResult
from engine.tasks import Question


def question_key(seed: int, qid: str) -> int:
    """A stable 63-bit integer per (run seed, question) for per-question randomness."""
    h = hashlib.sha1(f"{seed}:{qid}".encode()).digest()
    return int.from_bytes(h[:8], "big") >> 1


def call_seed(agent_seed: int, key: int, round_: int, salt: str = "") -> int:
    """Per-call sampling seed: reproducible, distinct per agent, question, round (and salt)."""
    h = hashlib.sha1(f"{agent_seed}:{key}:{round_}:{salt}".encode()).digest()
    return int.from_bytes(h[:4], "big")


def call_reads(round_: int, call: Call) -> Reads | None:
    """Who ``call`` reads: an agent call reads its ``peers`` (or, when it reads summaries,
    :attr:`AgentCall.summaries`, as summary nodes; or :attr:`AgentCall.reads` when set), then
    the edges pruned from it (:attr:`AgentCall.pruned`, flagged); a summary call (node
    :func:`~engine.protocols.base.summary_node` of its group) reads its ``sources``. None when it
    reads nobody and nothing was pruned (a first answer, a plain self-check)."""
    pruned: list[bool] | None = None
    if isinstance(call, AgentCall):
        dst, weights, group = call.agent, call.weights, call.group
        if call.reads is not None:
            srcs = list(call.reads)
        else:
            srcs = [summary_node(g) for g in call.summaries] if call.summaries else list(call.peers)
        if call.pruned:
            weights = [*(weights if weights is not None else [1.0] * len(srcs)), *(w for _, w in call.pruned)]
            pruned = [False] * len(srcs) + [True] * len(call.pruned)
            srcs += [a for a, _ in call.pruned]
    else:
        dst, srcs, weights, group = summary_node(call.group), list(call.sources), None, call.group
    if not srcs:
        return None
    if weights is not None:
        weights = [float(w) for w in weights]
        if all(w == 1.0 for w in weights):
            weights = None
    return Reads(round_, dst, srcs, weights, group, pruned)


def graded_columns(
    answers_by_round: list[list[str | None]],
    final_answer: str | None,
    gold: str,
    task: str,
    tie_key: int | None,
    errored: bool,
    votes_by_round: list[str | None] | None = None,
    tie: bool | None = None,
) -> dict[str, Any]:
    """A question row's graded columns, from every agent's answer after each round and the final
    answer: ``answer_by_round`` (the vote after each round, ties broken with ``tie_key`` as the
    protocol's own vote, or the protocol's own ``votes_by_round`` when it votes otherwise; the
    last entry is ``final_answer``), ``correct_by_round`` (the last equals
    ``correct``; an errored question is never correct), ``tie`` (the final vote had more than one
    answer on top: the protocol's own ``tie`` when it votes otherwise, else the majority over the
    agents' last answers), ``consensus`` and ``effective_rounds``. The
    run (:meth:`DebateLog.question_row`) and ``debate rescore`` grade with this one function."""
    if votes_by_round is not None and len(votes_by_round) != len(answers_by_round):
        raise ValueError(f"{len(votes_by_round)} votes for {len(answers_by_round)} rounds")
    earlier = (
        votes_by_round[:-1]
        if votes_by_round is not None
        else [majority_vote(a, tie_key) for a in answers_by_round[:-1]]
    )
    by_round = list(earlier) + [final_answer]
    correct_by_round = [(not errored) and answers_equal(a, gold, task) for a in by_round]
    last = answers_by_round[-1] if answers_by_round else []
    return {
        "final_answer": final_answer,
        "answer_by_round": by_round,
        "correct": correct_by_round[-1],
        "correct_by_round": correct_by_round,
        "tie": tie if tie is not None else len(tied_answers(last)) > 1,
        "consensus": [consensus(a) for a in answers_by_round],
        "effective_rounds": effective_rounds(answers_by_round),
    }


@dataclass
class DebateLog:
    """Everything one question's debate produced so far: call records, information edges, and
    each agent's transcript (alternating user/assistant messages) and latest answer."""

    question: Question
    records: list[CallRecord] = field(default_factory=list)
    reads: list[Reads] = field(default_factory=list)  # one entry per call that read anybody
    histories: dict[int, list[Message]] = field(default_factory=dict)
    answers: dict[int, str | None] = field(default_factory=dict)
    # prompt message texts by key that came with the results (TurnResult.messages)
    messages: dict[str, tuple[str, str]] = field(default_factory=dict)

    def turn(self, round_: int, call: Call, key: int) -> Turn:
        """What the agent needs for ``call``: for an agent call, its transcript (none for a call
        with boards, ``--prompt-layout shared``: its prompt is built from them) and latest answer."""
        if isinstance(call, AgentCall):
            history = list(self.histories.get(call.agent, ())) if call.boards is None else []
            return Turn(self.question, call, round_, key, history, self.answers.get(call.agent))
        return Turn(self.question, call, round_, key)

    def add(self, round_: int, call: Call, result: TurnResult) -> Reply:
        """Record a finished call; an agent turn that did not fail joins the agent's transcript
        (a shared-layout turn, :attr:`AgentCall.boards`, sends no user message back: its prompt
        is rebuilt from boards, so only its answer is kept).
        A side call (:attr:`AgentCall.side`, e.g. a review) is recorded with its edges but leaves
        the transcript and the latest answer alone."""
        rec = result.record
        self.records.append(rec)
        self.messages.update(result.messages)
        reads = call_reads(round_, call)
        if reads is not None:
            self.reads.append(reads)
        if isinstance(call, AgentCall) and not call.side and rec.error is None:
            if result.user is not None:  # none for a shared-layout turn: its boards are its memory
                self.histories.setdefault(call.agent, []).extend(
                    [result.user, {"role": "assistant", "content": rec.text}]
                )
            self.answers[call.agent] = rec.answer
        return Reply(rec.text, rec.answer, rec.error, rec.prompt_tokens, rec.completion_tokens)

    def question_row(self, outcome: Outcome, n_agents: int, tie_key: int | None = None) -> dict[str, Any]:
        """The question's result row.

        ``answer_by_round`` is the vote after each round (ties broken with ``tie_key``, as the
        protocol's own vote: see :func:`engine.protocols.base.tie_key`), its last entry the
        protocol's final answer; ``correct_by_round`` grades each (the last equals ``correct``).
        ``tie``: the final vote over the agents' last answers had more than one answer on top.

        A question with any call that ended in an error (after the engine's bounded retries), or
        whose debate could not go on (``outcome.info["error"]``), is marked ``errored`` and counted
        wrong: its vote came from an incomplete debate, which is not the protocol's result. Its
        calls, including the error rows, are all kept.

        Every metric column (:func:`engine.metrics.metrics`: the built-in ones, then those
        registered) is made by its metric's own ``compute`` from the question's
        :class:`engine.metrics.QuestionFacts` (:func:`engine.metrics.metric_values`, which fails on
        a metric declared but not produced): a new metric is declared and computed there.
        """
        q = self.question
        errored = any(r.error is not None for r in self.records) or "error" in (outcome.info or {})
        grades = graded_columns(
            outcome.answers_by_round,
            outcome.final_answer,
            q.gold,
            q.task,
            tie_key,
            errored,
            outcome.votes_by_round,
            outcome.tie,
        )
        metrics = metric_values(
            QuestionFacts(q, outcome, self.records, grades, errored, n_agents, self.reads, self.histories, self.answers)
        )
        return {
            "question_id": q.qid,
            "task": q.task,
            "question": q.text,
            "image": q.image_ref,  # a short reference (URL or sha256 prefix), never the image itself
            "n_agents": n_agents,
            "rounds_run": outcome.rounds_run,
            "gold": q.gold,
            **metrics,
            "protocol_info": json.dumps(outcome.info, default=str, sort_keys=True) if outcome.info else None,
        }

    @property
    def edges(self) -> list[tuple[int, int, int, float]]:
        """Every information edge as ``(round, src, dst, weight)``, in call order: one tuple per
        edge read (pruned ones left out), for tests and small debates (the log itself keeps :attr:`reads`)."""
        return [
            (r.round, s, r.dst, w)
            for r in self.reads
            for s, w, cut in zip(
                r.srcs, r.weights if r.weights is not None else [1.0] * len(r.srcs), r.pruned or [False] * len(r.srcs)
            )
            if not cut
        ]

    def graph_rows(self, start: int = 0) -> list[dict[str, Any]]:
        """The graphs table's rows (:data:`engine.results.GRAPHS_SCHEMA`) of :attr:`reads` from
        entry ``start`` on: one row per call, with the agents it read and their weights."""
        qid = self.question.qid
        return [
            {
                "question_id": qid,
                "round": r.round,
                "dst": r.dst,
                "srcs": r.srcs,
                "weights": r.weights,
                "dst_group": r.group,
                "pruned": r.pruned,
            }
            for r in self.reads[start:]
        ]


CallHook = Callable[[Turn], Awaitable[TurnResult]]
SimilarityHook = Callable[[list[str]], Awaitable[Any]]  # an n x n matrix: numpy array or lists
StepHook = Callable[[list[CallRecord], list[dict[str, Any]]], None]


async def debate(
    question: Question, cfg, call: CallHook, similarity: SimilarityHook | None = None, on_step: StepHook | None = None
) -> tuple[dict[str, Any], DebateLog]:
    """Run ``cfg.experiment.protocol`` on one question; returns its question row and log.

    ``call(turn)`` runs one call (the calls of a step run concurrently); ``similarity(texts)``
    answers a protocol's similarity request; ``on_step(records, graph_rows)`` sees each step's
    calls and new edges as soon as the step ends (the coordinator streams them to the writer).
    The row has the protocol's columns plus ``protocol`` and ``wall_s``.
    """
    start = time.perf_counter()
    key = question_key(cfg.experiment.seed, question.qid)
    log = DebateLog(question)
    gen = get_protocol(cfg.experiment.protocol)(Context(question=question, cfg=cfg, key=key))
    stages = protocol_spec(cfg.experiment.protocol).stages
    response: Any = None
    try:
        while True:
            try:
                request = gen.send(response)
            except StopIteration as stop:
                outcome = stop.value
                break
            if isinstance(request, Similarity):
                if similarity is None:
                    raise ServiceLost(f"--protocol {cfg.experiment.protocol} needs embeddings but the run has none")
                response = await similarity(request.texts)
                continue
            if not isinstance(request, Step):
                raise TypeError(
                    f"protocol {cfg.experiment.protocol} yielded {type(request).__name__}, not a Step or Similarity"
                )
            for c in request.calls:  # every kind is declared (engine/kinds.py)
                check_kind(c.stage, cfg.experiment.protocol, stages)
            results = await asyncio.gather(*(call(log.turn(request.round, c, key)) for c in request.calls))
            seen = len(log.reads)
            response = [log.add(request.round, c, r) for c, r in zip(request.calls, results)]
            if on_step is not None:
                on_step([r.record for r in results], log.graph_rows(seen))
    except ServiceLost as exc:  # the debate cannot go on: an errored question row, not a lost question
        gen.close()
        outcome = Outcome(None, [], info={"error": f"{type(exc).__name__}: {exc}"[:2000]})
    row = log.question_row(outcome, cfg.n_agents, tie_key(cfg, key))
    row.update(protocol=cfg.experiment.protocol, wall_s=time.perf_counter() - start)
    return row, log
