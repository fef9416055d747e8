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

Faults. Agents keep no memory (each turn carries the agent's transcript, which the debate
owns), so a dead agent needs only its configuration: when an agent group's process dies, Ray
restarts it (``max_restarts``), and the coordinator configures it again (its agents'
:class:`AgentSetup`, once per death however many of its turns failed) and resends the failed
turns, at most ``call_retries`` times per call. A replica that dies is restarted by Ray and
the agent sends its unanswered requests again (same seeds, so the same replies), at most
``call_retries`` times; after that the agent records an error result. An agent group that stays
dead gives error rows for its agents' calls. Any other exception raised by an agent or a
protocol is a bug: it stops the run.

Replicas. Under ``--prompt-layout paper`` each agent's calls go to the agent's own replica. Under
``shared`` the coordinator routes every call of one question's round to one replica of the call's
model (:class:`actors.scheduling.RoundRouter`: the least loaded, by the calls in flight it sent,
when the round starts) and names it on the turn, so the round's readers, whose prompts begin with
the same text, meet in one prefix cache. ``max_questions`` (from the driver: at most
``--max-concurrent-questions``, fewer where the replicas' KV caches hold fewer questions,
:mod:`engine.kv_budget`) bounds the debates in flight.

Calls travel micro-batched (:mod:`actors.batching`): the turns one agent group gets in the same
event-loop turn (any of its agents, any question) go as one streamed actor call, and the group's
requests to each replica likewise, so the Ray overhead per turn shrinks with the number of
questions in flight. A call that still fails becomes an error row (run, question, round, agent,
error text) and its question is marked ``errored``; a question whose debate cannot continue at all
(e.g. the embedding actor is gone) still gets its question row, errored. Nothing is dropped.

Writer. Rows go to the writer without waiting, but every write's result is awaited in the
background, and the writer is asked for its health (:meth:`WriterActor.tick`, which also flushes
rows older than its ``flush_seconds``) every :data:`WRITER_CHECK_S` seconds. A writer that died
or cannot write (:class:`engine.results.WriteFailed`: a full disk) stops the run within about a
second, as the error rate does below, with ``progress()["stopped"] == "writer"`` and the one-line
reason in ``progress()["writer_error"]``; a row the writer rejects as not fitting its schema is a
bug and is raised by :meth:`run`. ``progress()["questions_saved"]`` counts the question rows on
disk (what a progress bar may count).

Error rate. With ``--max-error-rate R`` below 1 the run stops once it has made at least
:data:`ERROR_RATE_MIN_CALLS` calls (so one early failure does not stop it) and more than R of
them errored (error rows over all call rows of this attempt, summary and side calls included):
the coordinator cancels every debate still running or waiting, flushes the writer and returns
the finished questions' rows, with ``progress()["stopped"]`` saying why. Calls and questions
written so far stay; a re-run resumes the questions left unfinished.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import ray

from actors.agent_actor import AgentNotConfigured, AgentSetup
from actors.batching import MicroBatcher
from actors.cluster import here
from actors.remote import actor
from actors.scheduling import RoundRouter, routes_rounds
from engine.config import RunConfig
from engine.debate import debate
from engine.messages import MessageLedger
from engine.records import CallRecord, ServiceLost, Turn, TurnResult
from engine.tasks import Question

log = logging.getLogger(__name__)

# --max-error-rate is checked only once a run has made this many calls
ERROR_RATE_MIN_CALLS = 20
# seconds between two health checks (and due flushes) of the writer
WRITER_CHECK_S = 1.0


def _error_record(turn: Turn, exc: BaseException) -> CallRecord:
    call = turn.call
    summary = turn.is_summary
    return CallRecord(
        question_id=turn.question.qid,
        round=turn.round,
        agent_id=-1 if summary else call.agent,
        kind=call.stage,
        model="",
        peers=list(call.sources if summary else call.peers),
        text="",
        answer=None,
        prompt_tokens=0,
        completion_tokens=0,
        latency_s=0.0,
        finish_reason="error",
        error=f"{type(exc).__name__}: {exc}"[:2000],
        seed=0,
        temperature=0.0,
        group=call.group if summary else None,
        side=turn.is_side,
    )


def writer_failure(exc: BaseException) -> str | None:
    """The one-line reason when ``exc`` (from a call to the writer) says the writer died or cannot
    write; None for anything else (a bug, e.g. a row that does not fit its schema)."""
    # function-level: importing pyarrow.compute, pyarrow.parquet here keeps it off start-up
    from engine.results import WriteFailed

    if isinstance(exc, ray.exceptions.RayActorError):
        return f"the writer actor died ({type(exc).__name__})"
    cause = getattr(exc, "cause", None)
    if isinstance(exc, ray.exceptions.RayTaskError) and isinstance(cause, WriteFailed):
        return str(cause).splitlines()[0]
    return None


def _agent_lost(exc: BaseException) -> bool:
    """The agent group's process is gone, or was restarted and has no configuration (see AgentGroupActor)."""
    return isinstance(exc, (ray.exceptions.RayActorError, AgentNotConfigured))


@actor(num_cpus=0, max_concurrency=10_000)
class CoordinatorActor:
    """Created once per engine; :meth:`setup` prepares it and the agents for one run."""

    def __init__(self):
        self.progress_state: dict[str, Any] = {}

    async def setup(
        self,
        cfg: RunConfig,
        run_id: str,
        groups: list,
        group_setups: list[list[AgentSetup]],
        writer,
        backend_label: str,
        simulated: bool,
        embedder=None,
        attempt: str = "",
        max_questions: int | None = None,
    ) -> list[int]:
        """Configure this coordinator and every agent group for a run (``group_setups[g]``: the
        agents group ``g`` hosts); returns the groups' process ids. ``max_questions``: debates in
        flight at most (None: ``--max-concurrent-questions``)."""
        self.cfg = cfg
        self.max_questions = max_questions or cfg.tuning.max_concurrent_questions
        self.run_id = run_id
        self.groups = groups
        self.group_setups = group_setups
        self.group_of = {s.agent_id: g for g, setups in enumerate(group_setups) for s in setups}
        self.model_of = {s.agent_id: s.spec.model for setups in group_setups for s in setups}
        self.router = (
            RoundRouter({s.spec.model: len(s.replicas) for setups in group_setups for s in setups})
            if routes_rounds(cfg)
            else None
        )
        # a group's configuration epoch: the turns that failed on one death restore it once
        self.epochs = [0] * len(groups)
        self.restoring = [asyncio.Lock() for _ in groups]
        self.writer = writer
        self.embedder = embedder
        # attempt: which invocation wrote a row; a resumed run re-debates unfinished questions, and
        # readers keep only the calls of the attempt that finished each question.
        self.labels = {"run_id": run_id, "backend": backend_label, "simulated": simulated, "attempt": attempt}
        self.retries = max(0, int(cfg.tuning.call_retries))
        # prompt messages already sent to the writer in this run (each agent group ships a text
        # once per process; several groups may ship the same system prompt or question)
        self.stored = MessageLedger()
        self.progress_state = {
            "questions_done": 0,
            "calls": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "correct": 0,
            "errored": 0,
            "agent_restores": 0,
            "call_retries": 0,
            "call_errors": 0,
            "first_error": None,
            "stopped": None,
            "questions_saved": 0,
            "writer_error": None,
        }
        self.tasks: list[asyncio.Future] = []
        self.acks: set[asyncio.Future] = set()  # writes whose result is still to come
        self.bug: BaseException | None = None  # an unexpected error of the writer: raised by run()
        # Turns for the same group issued in the same event-loop turn (many questions' rounds,
        # many agents) travel as one streamed actor call; each result comes back as soon as it is done.
        self.to_agents = MicroBatcher(self._open_agent_stream)
        return list(await asyncio.gather(*(a.configure.remote(s) for a, s in zip(groups, group_setups))))

    async def _open_agent_stream(self, g: int, turns: list[Turn]) -> AsyncIterator[list[tuple[int, Any]]]:
        async for ref in self.groups[g].turns.remote(turns):
            yield await ref

    async def _restore(self, g: int, epoch: int) -> int:
        """Configure group ``g`` again unless that happened since ``epoch`` (another of its
        failed turns did it); returns the group's epoch after."""
        async with self.restoring[g]:
            if self.epochs[g] == epoch:
                await self.groups[g].configure.remote(self.group_setups[g])
                self.epochs[g] += 1
                self.progress_state["agent_restores"] += 1
            return self.epochs[g]

    def where(self) -> dict[str, Any]:
        """Node id, node IP and GPU ids of this actor (the run's placement record)."""
        return here()

    def progress(self) -> dict[str, Any]:
        state = dict(self.progress_state)
        if getattr(self, "to_agents", None) is not None:
            state["agent_calls"], state["agent_turns_shipped"] = self.to_agents.calls, self.to_agents.items
        return state

    async def run(self, questions: list[Question]) -> list[dict[str, Any]]:
        """Debate ``questions``; returns the question rows of those that finished (all of them
        unless the run was stopped: error rate, writer failure, :meth:`stop`)."""
        sem = asyncio.Semaphore(self.max_questions)

        async def one(q: Question) -> dict[str, Any]:
            async with sem:
                return await self._debate(q)

        tasks = self.tasks = [asyncio.ensure_future(one(q)) for q in questions]
        if self.progress_state["stopped"]:  # stopped before the debates began
            for t in tasks:
                t.cancel()
        watch = asyncio.ensure_future(self._watch_writer())
        try:
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            watch.cancel()
        failed = [exc for t in done if not t.cancelled() and (exc := t.exception()) is not None]
        if failed:  # a bug: the other debates stop too (nothing of this run may write on), then it surfaces
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        await self._flush()  # what finished is on disk and resumable
        if failed or self.bug is not None:
            raise failed[0] if failed else self.bug  # type: ignore[misc]
        return [t.result() for t in tasks if not t.cancelled()]  # cancelled: the run was stopped

    def stop(self, reason: str) -> None:
        """Stop the run (a signal reached the driver): cancel every debate; :meth:`run` then
        flushes the writer and returns the finished questions' rows."""
        if not self.progress_state.get("stopped"):
            self.progress_state["stopped"] = reason
        for t in getattr(self, "tasks", []):
            t.cancel()

    async def _flush(self) -> None:
        """Flush the writer and wait for every write's result (a failure stops the run)."""
        if self.progress_state["stopped"] != "writer":
            try:
                written = await self.writer.flush.remote()
                self.progress_state["questions_saved"] = written.get("questions", 0)
            except Exception as exc:
                self._write_failed(exc)
        await asyncio.gather(*self.acks, return_exceptions=True)

    async def _watch_writer(self) -> None:
        """Every :data:`WRITER_CHECK_S` seconds: the writer's health and the question rows it wrote."""
        while True:
            await asyncio.sleep(WRITER_CHECK_S)
            try:
                written = await self.writer.tick.remote()
            except Exception as exc:
                self._write_failed(exc)
                return
            self.progress_state["questions_saved"] = written.get("questions", 0)

    def _send(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Rows to the writer without waiting; their result is awaited in the background."""
        ack = asyncio.ensure_future(self._ack(self.writer.write.remote(table, rows)))
        self.acks.add(ack)
        ack.add_done_callback(self.acks.discard)

    async def _ack(self, ref) -> None:
        try:
            await ref
        except Exception as exc:
            self._write_failed(exc)

    def _write_failed(self, exc: BaseException) -> None:
        """The writer died or cannot write (stop the run, say why), or failed otherwise (a bug:
        stop the run, :meth:`run` raises it)."""
        state = self.progress_state
        if state["stopped"] == "writer" or self.bug is not None:
            return
        reason = writer_failure(exc)
        if reason is None:
            self.bug = getattr(exc, "cause", None) or exc  # the writer's own exception, not Ray's wrapper
        else:
            log.info("run %s: stopping: %s", self.run_id, reason)  # the driver says it, once
            state["stopped"], state["writer_error"] = "writer", reason
        for t in self.tasks:
            t.cancel()

    async def _call(self, turn: Turn) -> TurnResult:
        """One turn through its agent's group, on the replica of its question's round when calls
        are routed per round (module docstring)."""
        if self.router is None:
            return await self._send_turn(turn)
        model = self.model_of[turn.call.agent]
        turn.replica = self.router.route(turn.question.qid, turn.round, model)
        try:
            return await self._send_turn(turn)
        finally:
            self.router.done(model, turn.replica)

    async def _send_turn(self, turn: Turn) -> TurnResult:
        """One turn through its agent's group; a lost group is configured again and the turn
        resent (bounded by ``call_retries``), after which the turn is an error record."""
        agent = turn.call.agent
        g = self.group_of[agent]
        epoch = self.epochs[g]
        last: BaseException | None = None
        for attempt in range(self.retries + 1):
            try:
                if attempt:
                    log.warning(
                        "agent %d lost (%s): configuring its group again and resending round %d of "
                        "question %s (retry %d of %d)",
                        agent,
                        type(last).__name__,
                        turn.round,
                        turn.question.qid,
                        attempt,
                        self.retries,
                    )
                    self.progress_state["call_retries"] += 1
                    epoch = await self._restore(g, epoch)
                out = await self.to_agents.submit(g, turn)
                self._write_messages(out)
                return out
            except Exception as exc:
                if not _agent_lost(exc):
                    raise  # a bug in the agent: stops the run
                last = exc
        log.warning(
            "agent %d: round %d of question %s failed after %d retries: an error row",
            agent,
            turn.round,
            turn.question.qid,
            self.retries,
        )
        return TurnResult(_error_record(turn, last))  # type: ignore[arg-type]

    async def _similarity(self, texts: list[str]) -> list[list[float]]:
        try:
            return await self.embedder.similarity.remote(texts)
        except ray.exceptions.RayActorError as exc:  # gone for good (restarts used up)
            raise ServiceLost(f"the embedding actor is gone: {type(exc).__name__}") from exc

    def _write_messages(self, result: TurnResult) -> None:
        """Send the prompt messages of ``result`` that the writer has not had yet (the prompts
        table): as soon as the result arrives, whether or not its call row is written later."""
        fresh = self.stored.new(result.messages) if result.messages else {}
        if fresh:
            rows = [{"message": k, "role": role, "content": text, **self.labels} for k, (role, text) in fresh.items()]
            self._send("prompts", rows)

    def _write_step(self, records: list[CallRecord], graph: list[dict[str, Any]]) -> None:
        rows = []
        for rec in records:
            rows.append({**rec.to_row(), **self.labels})
            self.progress_state["calls"] += 1
            self.progress_state["prompt_tokens"] += rec.prompt_tokens
            self.progress_state["completion_tokens"] += rec.completion_tokens
            if rec.error is not None:
                self.progress_state["call_errors"] += 1
                self.progress_state["first_error"] = self.progress_state["first_error"] or rec.error
        self._send("calls", rows)
        if graph:
            self._send("graphs", [{**e, **self.labels} for e in graph])
        self._check_error_rate()

    def _check_error_rate(self) -> None:
        """Stop the run (cancel every debate) once more than ``max_error_rate`` of at least
        :data:`ERROR_RATE_MIN_CALLS` calls errored; see the module docstring."""
        state, limit = self.progress_state, self.cfg.tuning.max_error_rate
        calls, errors = state["calls"], state["call_errors"]
        if state["stopped"] or calls < ERROR_RATE_MIN_CALLS or errors <= limit * calls:
            return
        state["stopped"] = "error rate"
        log.warning(
            "run %s: %d of %d calls errored, more than --max-error-rate %g: stopping", self.run_id, errors, calls, limit
        )
        for t in self.tasks:
            t.cancel()

    async def _debate(self, q: Question) -> dict[str, Any]:
        try:
            row, _ = await debate(
                q, self.cfg, self._call, self._similarity if self.embedder is not None else None, self._write_step
            )
        finally:
            if self.router is not None:
                self.router.forget(q.qid)
        row.update(self.labels)
        self._send("questions", [row])
        self.progress_state["questions_done"] += 1
        self.progress_state["correct"] += int(row["correct"])
        self.progress_state["errored"] += int(row["errored"])
        return row
