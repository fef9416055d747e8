"""The coordinator actor: drives many questions' debates at once and enforces the topology.

Each question is an asyncio task that owns a :class:`engine.debate.Debate`. A round's turns are
sent to the agent actors together; the question moves to its next round as soon as *its own*
round is complete (no barrier across questions), so while one question waits for a slow reply
the replicas keep serving the others. At most ``max_concurrent_questions`` debates are in flight.
Only the coordinator hands an agent its peers' replies, so an agent can read nothing the topology
does not allow. Call rows go to the writer after every round; the question row when it ends.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import ray

from engine.accounting import question_row
from engine.config import RunConfig
from engine.debate import Debate, build_topology, question_key
from engine.records import CallRecord, Turn
from engine.tasks import Question


@ray.remote(num_cpus=0, max_concurrency=10_000)
class CoordinatorActor:
    def __init__(self, cfg: RunConfig, run_id: str, agents: list, writer, backend_label: str, simulated: bool):
        self.cfg = cfg
        self.run_id = run_id
        self.agents = agents
        self.writer = writer
        self.backend_label = backend_label
        self.simulated = simulated
        self.topology = build_topology(cfg)
        self.progress_state = {"questions_done": 0, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "correct": 0}

    def progress(self) -> dict[str, Any]:
        return dict(self.progress_state)

    async def run(self, questions: list[Question]) -> list[dict[str, Any]]:
        sem = asyncio.Semaphore(self.cfg.max_concurrent_questions)

        async def one(q: Question) -> dict[str, Any]:
            async with sem:
                return await self._debate(q)

        rows = await asyncio.gather(*(one(q) for q in questions))
        await self.writer.flush.remote()
        return rows

    async def _turn(self, debate: Debate, turn: Turn) -> CallRecord:
        prev = turn.round - 1
        peers = [(j, debate.records[(prev, j)].text, debate.records[(prev, j)].answer) for j in turn.peers]
        try:
            return await self.agents[turn.agent].step.remote(debate.question, turn, peers, debate.key)
        except Exception as exc:  # an actor failure becomes an error row, not a lost question
            return CallRecord(
                question_id=debate.question.qid, round=turn.round, agent_id=turn.agent, kind=turn.kind,
                model="", peers=list(turn.peers), text="", answer=None, prompt_tokens=0, completion_tokens=0,
                latency_s=0.0, finish_reason="error", error=f"{type(exc).__name__}: {exc}"[:2000], seed=0,
                temperature=0.0,
            )

    async def _debate(self, q: Question) -> dict[str, Any]:
        start = time.perf_counter()
        debate = Debate(
            question=q, topology=self.topology, n_agents=self.cfg.n_agents, n_rounds=self.cfg.n_rounds,
            key=question_key(self.cfg.seed, q.qid),
        )
        while True:
            turns = debate.plan()
            records = await asyncio.gather(*(self._turn(debate, t) for t in turns))
            rows = []
            for rec in records:
                debate.record(rec)
                row = rec.to_row()
                row.update(run_id=self.run_id, backend=self.backend_label, simulated=self.simulated)
                rows.append(row)
                self.progress_state["calls"] += 1
                self.progress_state["prompt_tokens"] += rec.prompt_tokens
                self.progress_state["completion_tokens"] += rec.completion_tokens
            self.writer.write.remote("calls", rows)
            if not debate.advance():
                break
        for agent in self.agents:
            agent.forget.remote(q.qid)
        row = question_row(debate, self.run_id, self.cfg.protocol, self.backend_label, self.simulated,
                           time.perf_counter() - start)
        self.writer.write.remote("questions", [row])
        self.progress_state["questions_done"] += 1
        self.progress_state["correct"] += int(row["correct"])
        return row
