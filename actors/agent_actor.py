"""The agent actor: one debate agent's memory and prompts, bound to one replica.

It reserves no CPU (``num_cpus=0``): it only builds prompts and waits on its replica. It keeps a
transcript per question in flight (dropped with ``forget`` when the question ends), renders the
call's prompt stage from :mod:`engine.prompts`, sends the messages to its replica, parses the
answer and returns a :class:`~engine.records.CallRecord`. It also serves the summary calls that
a protocol assigns to its model (those never touch its memory). The coordinator sends it turns
in micro-batches (:meth:`AgentActor.turns`) and it sends its requests to the replica the same
way (:mod:`actors.batching`).
"""

from __future__ import annotations

import os
from typing import Any

import ray

from actors.batching import MicroBatcher, serve_stream
from engine.config import AgentSpec
from engine.debate import call_seed
from engine.extract import extract_answer
from engine.prompts import PromptSet, build_messages
from engine.protocols.base import SUMMARIZER, AgentCall, SummaryCall
from engine.records import CallRecord, GenRequest, GenResult, Message
from engine.tasks import Question


class AgentCore:
    """The pure part of an agent (no Ray): memory per question, prompts, answer parsing."""

    def __init__(self, agent_id: int, spec: AgentSpec, prompts: PromptSet, simulated: bool):
        self.agent_id = agent_id
        self.spec = spec
        self.prompts = prompts
        self.simulated = simulated
        self.memory: dict[str, list[Message]] = {}
        self.last_answer: dict[str, str | None] = {}

    def _oracle(self, question: Question, answers: list[str | None], kind: str) -> dict[str, Any]:
        if not self.simulated:  # only the simulated model is ever shown the gold answer
            return {}
        return {
            "gold": question.gold,
            "task": question.task,
            "n_choices": len(question.choices) or 4,
            "peer_answers": list(answers),
            "own_answer": self.last_answer.get(question.qid) if kind != "summary" else None,
            "kind": kind,
        }

    def request(self, question: Question, call: AgentCall, round_: int, key: int) -> tuple[GenRequest, Message]:
        history = self.memory.setdefault(question.qid, [])
        msgs, user = build_messages(
            self.prompts, question.text, call.stage, history, call.peer_texts,
            system_prompt=self.spec.system_prompt, memory=call.memory, values=call.values,
        )
        req = GenRequest(
            messages=msgs, temperature=self.spec.temperature, top_p=self.spec.top_p,
            max_tokens=self.spec.max_tokens, seed=call_seed(self.spec.seed, key, round_),
            meta=self._oracle(question, call.peer_answers, call.stage), context_overflow=self.spec.context_overflow,
        )
        return req, user

    def summary_request(self, question: Question, call: SummaryCall, round_: int, key: int) -> GenRequest:
        text = self.prompts.render(call.stage, question=question.text,
                                   peers=self.prompts.peers_block([(i, t) for i, t in enumerate(call.texts)]))
        return GenRequest(
            messages=[{"role": "user", "content": text}], temperature=self.spec.temperature, top_p=self.spec.top_p,
            max_tokens=self.spec.max_tokens, seed=call_seed(self.spec.seed, key, round_, f"summary:{call.group}"),
            meta=self._oracle(question, call.answers, "summary"), context_overflow=self.spec.context_overflow,
        )

    def record(self, question: Question, round_: int, call: AgentCall | SummaryCall, req: GenRequest,
               res: GenResult, user: Message | None = None) -> CallRecord:
        answer = None
        if res.error is None:
            # a reply cut off at the token limit counts only a marked answer, never its last number
            answer = extract_answer(res.text, question.task, len(question.choices) or 4,
                                    marked_only=res.finish_reason == "length")
            if user is not None:  # an agent turn: remember it
                history = self.memory.setdefault(question.qid, [])
                history.append(user)
                history.append({"role": "assistant", "content": res.text})
                self.last_answer[question.qid] = answer
        is_summary = isinstance(call, SummaryCall)
        return CallRecord(
            question_id=question.qid, round=round_, agent_id=SUMMARIZER if is_summary else self.agent_id,
            kind=call.stage, model=self.spec.model,
            peers=list(call.sources if is_summary else call.peers), text=res.text, answer=answer,
            prompt_tokens=res.prompt_tokens, completion_tokens=res.completion_tokens, latency_s=res.latency_s,
            finish_reason=res.finish_reason, error=res.error, seed=req.seed, temperature=req.temperature,
            group=call.group if is_summary else None, truncated_messages=res.truncated_messages,
        )

    def forget(self, qid: str) -> None:
        self.memory.pop(qid, None)
        self.last_answer.pop(qid, None)

    def replay(self, question: Question, call: AgentCall, round_: int, key: int, text: str) -> None:
        """Rebuild memory after a restart: redo one recorded turn without calling a model.

        Prompts depend only on the call and the memory so far, so replaying a question's recorded
        turns in order (each with the reply that was recorded for it) gives back the exact
        transcript and last answer the lost agent had.
        """
        req, user = self.request(question, call, round_, key)
        self.record(question, round_, call, req, GenResult(text, 0, 0, 0.0), user)


class AgentStateLost(RuntimeError):
    """The agent process was restarted (by Ray) since the coordinator configured it: its
    configuration and memory are gone, so the coordinator must configure and restore it."""


@ray.remote(num_cpus=0, max_concurrency=10_000)
class AgentActor:
    """One agent. Created once per engine and reused across runs through :meth:`configure`.

    Every call carries the ``token`` of the configuration it expects; after Ray restarts a dead
    agent process (``max_restarts``) the fresh process has no token, so its first call raises
    :class:`AgentStateLost` instead of answering with an empty memory, and the coordinator
    configures it again and replays its recorded turns (:meth:`restore`).
    """

    def __init__(self):
        self.core: AgentCore | None = None
        self.token: str | None = None
        self.retries = 0
        # Requests to the replica made in the same event-loop turn (this agent's turns in many
        # questions) travel as one streamed call (actors/batching.py).
        self._to_replica = MicroBatcher(self._open_replica_stream)

    def configure(self, token: str, agent_id: int, spec: AgentSpec, prompts: PromptSet, simulated: bool, replica,
                  cache=None, cache_namespace: str = "", retries: int = 0) -> int:
        self.core = AgentCore(agent_id, spec, prompts, simulated)
        self.replica = replica
        self.retries = max(0, int(retries))  # resubmissions of a request whose replica died
        # First-round reuse (actors/cache_actor.py): round-0 replies come from / go to this cache.
        self.cache = cache
        self.cache_namespace = cache_namespace
        self.token = token
        return os.getpid()

    def restore(self, token: str, turns: list[tuple[Question, AgentCall, int, int, str]]) -> int:
        """Replay recorded turns (question, call, round, key, reply text) in order."""
        self._check(token)
        for question, call, round_, key, text in turns:
            self.core.replay(question, call, round_, key, text)
        return len(turns)

    def _check(self, token: str) -> None:
        if token != self.token:
            raise AgentStateLost(f"agent process {os.getpid()} has configuration {self.token!r}, expected {token!r}")

    async def ready(self) -> int:
        return os.getpid()

    async def _open_replica_stream(self, _dest, requests: list[GenRequest]):
        async for ref in self.replica.generate_stream.remote(requests):
            yield await ref

    async def _generate(self, req: GenRequest) -> GenResult:
        """The replica's reply. A replica that dies mid-request is restarted by Ray; the request
        is sent again, at most ``retries`` times (same seed, so the same reply), after which it
        is an error result (recorded as an error row), not an exception."""
        for attempt in range(self.retries + 1):
            try:
                return await self._to_replica.submit(None, req)
            except ray.exceptions.RayActorError as exc:
                error = exc
        return GenResult("", 0, 0, 0.0, "error",
                         f"replica unavailable after {self.retries + 1} attempts: {type(error).__name__}: {error}"[:2000])

    @ray.method(max_task_retries=0)
    async def turns(self, token: str, items: list[tuple]):
        """Several turns at once (the coordinator's micro-batch): each item is
        ("step" | "summary", question, call, round, key); yields lists of (index, CallRecord or
        exception) as turns end. A stale token fails the whole call (see :class:`AgentStateLost`)."""
        self._check(token)

        async def one(item):
            kind, question, call, round_, key = item
            method = self.step if kind == "step" else self.summarize
            return await method(token, question, call, round_, key)

        async for chunk in serve_stream(items, one):
            yield chunk

    async def step(self, token: str, question: Question, call: AgentCall, round_: int, key: int) -> CallRecord:
        self._check(token)
        req, user = self.core.request(question, call, round_, key)
        if round_ == 0 and self.cache is not None:
            return await self._first_round(question, call, req, user)
        res = await self._generate(req)
        return self.core.record(question, round_, call, req, res, user)

    async def _first_round(self, question: Question, call: AgentCall, req: GenRequest, user: Message) -> CallRecord:
        """Round 0 through the cache: a hit is recorded with the original's text and token counts
        and ``reused=True``; on a miss this agent generates and publishes the reply."""
        from actors.cache_actor import first_round_key

        ckey = first_round_key(req, self.core.spec.model, self.cache_namespace)
        res = await self.cache.acquire.remote(ckey)
        if res is not None:
            rec = self.core.record(question, 0, call, req, res, user)
            rec.reused = True
            return rec
        res = None
        try:
            res = await self._generate(req)
        finally:  # always release the key, so agents waiting on it never hang
            await self.cache.put.remote(ckey, res)
        return self.core.record(question, 0, call, req, res, user)

    async def summarize(self, token: str, question: Question, call: SummaryCall, round_: int, key: int) -> CallRecord:
        self._check(token)
        req = self.core.summary_request(question, call, round_, key)
        res = await self._generate(req)
        return self.core.record(question, round_, call, req, res)

    async def forget(self, qid: str) -> None:
        if self.core is not None:
            self.core.forget(qid)
