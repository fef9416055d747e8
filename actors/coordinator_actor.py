"""The coordinator actor: drives many questions' debates at once and enforces the topology.

Each question is an asyncio task that runs its protocol generator (:mod:`engine.protocols`):
a yielded :class:`Step` is sent to the agent actors at once (agent calls to the agent, summary
calls to the agent whose model serves them) and the replies are sent back into the generator; a
yielded :class:`Similarity` goes to the embedding actor. A question moves on as soon as *its
own* step is done (no barrier across questions), so while one question waits for a slow reply
the replicas keep serving the others. At most ``max_concurrent_questions`` debates are in
flight. Only the coordinator hands an agent what it may read, so no agent reads anything the
protocol did not give it. Call and graph rows go to the writer after every step, the question
row when the question ends.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import ray

from engine.config import RunConfig
from engine.debate import DebateLog, question_key
from engine.protocols import Context, Similarity, Step, SummaryCall, get_protocol
from engine.records import CallRecord
from engine.tasks import Question


def _error_record(q: Question, round_: int, call, exc: BaseException) -> CallRecord:
    summary = isinstance(call, SummaryCall)
    return CallRecord(
        question_id=q.qid, round=round_, agent_id=-1 if summary else call.agent, kind=call.stage, model="",
        peers=list(call.sources if summary else call.peers), text="", answer=None, prompt_tokens=0,
        completion_tokens=0, latency_s=0.0, finish_reason="error", error=f"{type(exc).__name__}: {exc}"[:2000],
        seed=0, temperature=0.0, group=call.group if summary else None,
    )


@ray.remote(num_cpus=0, max_concurrency=10_000)
class CoordinatorActor:
    def __init__(self, cfg: RunConfig, run_id: str, agents: list, writer, backend_label: str, simulated: bool,
                 embedder=None, attempt: str = ""):
        self.cfg = cfg
        self.run_id = run_id
        self.agents = agents
        self.writer = writer
        self.embedder = embedder
        # attempt: which invocation wrote a row; a resumed run re-debates unfinished questions, and
        # readers keep only the calls of the attempt that finished each question.
        self.labels = {"run_id": run_id, "backend": backend_label, "simulated": simulated, "attempt": attempt}
        self.protocol = get_protocol(cfg.protocol)
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

    async def _call(self, q: Question, round_: int, call, key: int) -> CallRecord:
        try:
            if isinstance(call, SummaryCall):
                return await self.agents[call.agent].summarize.remote(q, call, round_, key)
            return await self.agents[call.agent].step.remote(q, call, round_, key)
        except Exception as exc:  # an actor failure becomes an error row, not a lost question
            return _error_record(q, round_, call, exc)

    async def _similarity(self, texts: list[str]) -> list[list[float]]:
        if self.embedder is None:
            raise RuntimeError("this protocol needs embeddings but the run has no embedding actor")
        return await self.embedder.similarity.remote(texts)

    async def _debate(self, q: Question) -> dict[str, Any]:
        start = time.perf_counter()
        key = question_key(self.cfg.seed, q.qid)
        log = DebateLog(q)
        gen = self.protocol(Context(question=q, cfg=self.cfg, key=key))
        response: Any = None
        while True:
            try:
                request = gen.send(response)
            except StopIteration as stop:
                outcome = stop.value
                break
            if isinstance(request, Similarity):
                response = await self._similarity(request.texts)
                continue
            assert isinstance(request, Step), request
            records = await asyncio.gather(*(self._call(q, request.round, c, key) for c in request.calls))
            n_edges = len(log.edges)
            response = [log.add(request.round, c, r) for c, r in zip(request.calls, records)]
            rows = []
            for rec in records:
                rows.append({**rec.to_row(), **self.labels})
                self.progress_state["calls"] += 1
                self.progress_state["prompt_tokens"] += rec.prompt_tokens
                self.progress_state["completion_tokens"] += rec.completion_tokens
            self.writer.write.remote("calls", rows)
            graph = [{**e, **self.labels} for e in log.graph_rows()[n_edges:]]
            if graph:
                self.writer.write.remote("graphs", graph)
        for agent in self.agents:
            agent.forget.remote(q.qid)
        row = {**log.question_row(outcome, self.cfg.n_agents), **self.labels, "protocol": self.cfg.protocol,
               "wall_s": time.perf_counter() - start}
        self.writer.write.remote("questions", [row])
        self.progress_state["questions_done"] += 1
        self.progress_state["correct"] += int(row["correct"])
        return row
