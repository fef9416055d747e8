"""The per-question debate state the coordinator keeps while it drives a protocol.

Pure logic. A protocol (:mod:`engine.protocols`) decides what happens; :class:`DebateLog`
records what did happen — every call and every information edge of every round — and turns it,
with the protocol's :class:`~engine.protocols.base.Outcome`, into the question's result row.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from engine.extract import answers_equal, majority_vote, tied_answers
from engine.protocols.base import SUMMARIZER, AgentCall, Call, Outcome, Reply, consensus, effective_rounds
from engine.records import CallRecord
from engine.tasks import Question


def question_key(seed: int, qid: str) -> int:
    """A stable 63-bit integer per (run seed, question) for per-question randomness."""
    h = hashlib.sha1(f"{seed}:{qid}".encode()).digest()
    return int.from_bytes(h[:8], "big") >> 1


def call_seed(agent_seed: int, key: int, round_: int, salt: str = "") -> int:
    """Per-call sampling seed: reproducible, distinct per agent, question, round (and salt)."""
    h = hashlib.sha1(f"{agent_seed}:{key}:{round_}:{salt}".encode()).digest()
    return int.from_bytes(h[:4], "big")


def call_edges(call: Call) -> list[tuple[int, int, float]]:
    """Information edges (src, dst, weight) of one call: who this call reads."""
    if isinstance(call, AgentCall):
        weights = call.weights or [1.0] * len(call.peers)
        return [(src, call.agent, float(w)) for src, w in zip(call.peers, weights)]
    return [(src, SUMMARIZER, 1.0) for src in call.sources]


@dataclass
class DebateLog:
    question: Question
    records: list[CallRecord] = field(default_factory=list)
    edges: list[tuple[int, int, int, float]] = field(default_factory=list)  # (round, src, dst, weight)

    def add(self, round_: int, call: Call, rec: CallRecord) -> Reply:
        self.records.append(rec)
        self.edges.extend((round_, s, d, w) for s, d, w in call_edges(call))
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
        """
        q, recs = self.question, self.records
        errored = any(r.error is not None for r in recs) or "error" in (outcome.info or {})
        by_round = [majority_vote(a, tie_key) for a in outcome.answers_by_round[:-1]] + [outcome.final_answer]
        correct_by_round = [(not errored) and answers_equal(a, q.gold, q.task) for a in by_round]
        last = outcome.answers_by_round[-1] if outcome.answers_by_round else []
        return {
            "question_id": q.qid,
            "task": q.task,
            "n_agents": n_agents,
            "rounds_run": outcome.rounds_run,
            "effective_rounds": effective_rounds(outcome.answers_by_round),
            "stopped_early": outcome.stopped_early,
            "final_answer": outcome.final_answer,
            "gold": q.gold,
            "correct": correct_by_round[-1],
            "answer_by_round": by_round,
            "correct_by_round": correct_by_round,
            "tie": len(tied_answers(last)) > 1,
            "errored": errored,
            "n_calls": len(recs),
            "n_summary_calls": sum(r.agent_id == SUMMARIZER for r in recs),
            "n_skipped": outcome.skipped_turns,
            "n_invalid": sum(r.answer is None and r.error is None and r.agent_id != SUMMARIZER for r in recs),
            "n_errors": sum(r.error is not None for r in recs),
            "prompt_tokens": sum(r.prompt_tokens for r in recs),
            "completion_tokens": sum(r.completion_tokens for r in recs),
            "consensus": [consensus(a) for a in outcome.answers_by_round],
            "protocol_info": json.dumps(outcome.info, default=str, sort_keys=True) if outcome.info else None,
        }

    def graph_rows(self) -> list[dict[str, Any]]:
        return [{"question_id": self.question.qid, "round": r, "src": s, "dst": d, "weight": w}
                for r, s, d, w in self.edges]
