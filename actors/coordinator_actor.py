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

Faults. The coordinator configures the agent actors for each run and keeps a journal of every
agent's recorded turns for the questions in flight. When an agent process dies, Ray restarts it
(``max_restarts``); the restarted process knows nothing, so the coordinator configures it again,
replays its journal (:meth:`AgentActor.restore`) and retries the failed call, at most
``call_retries`` times per call. A replica that dies is restarted by Ray and the agent sends its
unanswered requests again (same seeds, so the same replies), at most ``call_retries`` times;
after that the agent records an error result.

Calls travel micro-batched (:mod:`actors.batching`): the turns one agent gets in the same
event-loop turn go as one streamed actor call, and the agent's requests to its replica likewise,
so the Ray overhead per turn shrinks with the number of questions in flight. A call that still fails becomes an error row (run, question, round, agent, error
text) and its question is marked ``errored``; a question whose debate cannot continue at all
(e.g. the embedding actor is gone) still gets its question row, errored. Nothing is dropped.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import ray

from actors.batching import MicroBatcher
from engine.config import RunConfig
from engine.debate import DebateLog, question_key
from engine.protocols import Context, Outcome, Similarity, Step, SummaryCall, get_protocol
from engine.protocols.base import tie_key
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


def _state_lost(exc: BaseException) -> bool:
    """The agent process is gone or was restarted without its state (see AgentActor)."""
    from actors.agent_actor import AgentStateLost

    return isinstance(exc, (ray.exceptions.RayActorError, AgentStateLost))


@ray.remote(num_cpus=0, max_concurrency=10_000)
class CoordinatorActor:
    """Created once per engine; :meth:`setup` prepares it and the agents for one run."""

    def __init__(self):
        self.progress_state: dict[str, Any] = {}

    async def setup(self, cfg: RunConfig, run_id: str, agents: list, agent_setups: list[tuple], writer,
                    backend_label: str, simulated: bool, embedder=None, attempt: str = "") -> list[int]:
        """Configure this coordinator and every agent for a run.

        ``agent_setups[i]`` are the arguments of ``AgentActor.configure`` after the token:
        (agent id, spec, prompts, simulated, replica, cache, cache namespace). Returns the agents'
        process ids.
        """
        self.cfg = cfg
        self.run_id = run_id
        self.agents = agents
        self.agent_setups = agent_setups
        self.writer = writer
        self.embedder = embedder
        self.token = f"{attempt}-{uuid.uuid4().hex[:8]}"
        # attempt: which invocation wrote a row; a resumed run re-debates unfinished questions, and
        # readers keep only the calls of the attempt that finished each question.
        self.labels = {"run_id": run_id, "backend": backend_label, "simulated": simulated, "attempt": attempt}
        self.protocol = get_protocol(cfg.protocol)
        self.retries = max(0, int(cfg.call_retries))
        self.journal: dict[str, dict[int, list[tuple]]] = {}  # qid -> agent -> recorded turns
        self.epochs = [0] * len(agents)
        self.locks = [asyncio.Lock() for _ in agents]
        self.progress_state = {"questions_done": 0, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                               "correct": 0, "errored": 0, "agent_restores": 0, "call_retries": 0}
        # Turns for the same agent issued in the same event-loop turn (many questions' rounds)
        # travel as one streamed actor call; each result comes back as soon as it is done.
        self.to_agents = MicroBatcher(self._open_agent_stream)
        return list(await asyncio.gather(*(a.configure.remote(self.token, *s, self.retries)
                                           for a, s in zip(agents, agent_setups))))

    async def _open_agent_stream(self, i: int, items: list[tuple]):
        async for ref in self.agents[i].turns.remote(self.token, items):
            yield await ref

    def where(self) -> dict[str, Any]:
        """Node id, node IP and GPU ids of this actor (the run's placement record)."""
        from actors.cluster import here

        return here()

    def progress(self) -> dict[str, Any]:
        state = dict(self.progress_state)
        if getattr(self, "to_agents", None) is not None:
            state["agent_calls"], state["agent_turns_shipped"] = self.to_agents.calls, self.to_agents.items
        return state

    async def run(self, questions: list[Question]) -> list[dict[str, Any]]:
        sem = asyncio.Semaphore(self.cfg.max_concurrent_questions)

        async def one(q: Question) -> dict[str, Any]:
            async with sem:
                return await self._debate(q)

        rows = await asyncio.gather(*(one(q) for q in questions))
        await self.writer.flush.remote()
        return rows

    async def _restore(self, i: int, epoch: int) -> None:
        """Configure agent ``i`` again and replay its journal, once per loss (``epoch``)."""
        async with self.locks[i]:
            if self.epochs[i] != epoch:  # another call already restored it
                return
            agent = self.agents[i]
            await agent.configure.remote(self.token, *self.agent_setups[i], self.retries)
            turns = [t for per_agent in self.journal.values() for t in per_agent.get(i, [])]
            await agent.restore.remote(self.token, turns)
            self.epochs[i] += 1
            self.progress_state["agent_restores"] += 1

    async def _call(self, q: Question, round_: int, call, key: int) -> CallRecord:
        summary = isinstance(call, SummaryCall)
        last: BaseException | None = None
        for attempt in range(self.retries + 1):
            epoch = self.epochs[call.agent]
            try:
                if attempt:
                    self.progress_state["call_retries"] += 1
                    await self._restore(call.agent, epoch)
                    epoch = self.epochs[call.agent]
                rec = await self.to_agents.submit(call.agent, ("summary" if summary else "step", q, call, round_, key))
            except Exception as exc:
                last = exc
                if _state_lost(exc):
                    continue  # restore the agent and try again (bounded)
                break  # anything else is not cured by retrying
            if not summary and rec.error is None:
                self.journal.setdefault(q.qid, {}).setdefault(call.agent, []).append((q, call, round_, key, rec.text))
            return rec
        return _error_record(q, round_, call, last)  # type: ignore[arg-type]

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
        try:
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
        except Exception as exc:  # the debate cannot go on: an errored question row, not a lost question
            gen.close()
            outcome = Outcome(None, [], info={"error": f"{type(exc).__name__}: {exc}"[:2000]})
        for agent in self.agents:
            agent.forget.remote(q.qid)
        self.journal.pop(q.qid, None)
        row = {**log.question_row(outcome, self.cfg.n_agents, tie_key(self.cfg, key)), **self.labels, "protocol": self.cfg.protocol,
               "wall_s": time.perf_counter() - start}
        self.writer.write.remote("questions", [row])
        self.progress_state["questions_done"] += 1
        self.progress_state["correct"] += int(row["correct"])
        self.progress_state["errored"] += int(row["errored"])
        return row
