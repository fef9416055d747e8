"""Agent actors: one Ray actor hosts a group of debate agents, each bound to its replica.

An agent is an :class:`AgentCore` (its id, settings, model, prompts and seed stream) plus its
:class:`AgentSetup` (the replica it calls, the first-round cache); it holds no memory between
calls: every :class:`~engine.records.Turn` carries the agent's transcript of the question (kept
by the debate, :class:`engine.debate.DebateLog`). An :class:`AgentGroupActor` hosts one or many
agents (``--agents-per-actor``): a turn names its agent (``turn.call.agent``) and is rendered,
sent and parsed by that agent's core exactly as it would be in an actor of its own, so packing
agents changes no prompt, seed or record. Per turn the agent renders the call's prompt stage
from :mod:`engine.prompts`, sends the messages to its replica, parses the answer and returns a
:class:`~engine.records.TurnResult`. It also serves the summary calls that a protocol assigns
to its model, and its side calls (:attr:`~engine.protocols.base.AgentCall.side`: a review or
score of peers, rendered with the agent's transcript like a turn, with a seed of its own and no
parsed answer; they skip the first-round cache).

The actor reserves no CPU (``num_cpus=0``): it only builds prompts and waits on replicas. The
coordinator sends it turns in micro-batches (:meth:`AgentGroupActor.turns`, one stream for all
of its agents' turns) and it sends its requests to each replica the same way
(:mod:`actors.batching`: one stream per replica, carrying every hosted agent's requests). A
restarted group needs only its agents' configurations (:class:`AgentSetup`).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import ray

from actors.batching import MicroBatcher, serve_stream
from actors.cache_actor import first_round_key
from actors.cluster import here
from actors.remote import actor
from engine.config import AgentSpec
from engine.debate import call_seed, question_key
from engine.extract import extract_answer
from engine.messages import MessageLedger, stored_messages, with_image
from engine.prompts import PromptSet, build_messages, summary_content
from engine.protocols.base import SUMMARIZER
from engine.records import CallRecord, GenRequest, GenResult, Message, Turn, TurnResult


@dataclass
class AgentSetup:
    """One agent's configuration for one run (the coordinator sends a group's with :meth:`AgentGroupActor.configure`).

    ``replica``: the replica actor serving the agent (its own, for the whole run); ``replicas``:
    every replica of the agent's model in layout order, of which a turn routed per question's
    round (``--prompt-layout shared``, :mod:`actors.scheduling`) names one (``Turn.replica``);
    ``cache``/``cache_namespace``: the first-round cache (``actors/cache_actor.py``) or None;
    ``retries``: resubmissions of a request whose replica died before it becomes an error row.
    """

    agent_id: int
    spec: AgentSpec
    prompts: PromptSet
    simulated: bool
    replica: Any
    cache: Any = None
    cache_namespace: str = ""
    retries: int = 0
    store_prompts: bool = True
    replicas: list[Any] = field(default_factory=list)

    def serving(self, turn: Turn) -> Any:
        """The replica actor that answers ``turn``: the one it names, else the agent's own."""
        return self.replica if turn.replica is None else self.replicas[turn.replica]


class AgentCore:
    """The pure part of an agent (no Ray, no memory): prompts for a :class:`Turn` and the parsed
    record of its reply. The agent's transcript belongs to the debate (:class:`engine.debate.DebateLog`)
    and comes with every turn. With ``store_prompts`` each record names its request's messages
    (``CallRecord.prompt``) and the result carries their texts (``TurnResult.messages``)."""

    def __init__(
        self, agent_id: int, spec: AgentSpec, prompts: PromptSet, simulated: bool, store_prompts: bool = False
    ):
        self.agent_id = agent_id
        self.spec = spec
        self.prompts = prompts
        self.simulated = simulated
        self.store_prompts = store_prompts

    def _oracle(self, turn: Turn, answers: list[str | None], kind: str) -> dict[str, Any]:
        """What the SIMULATED model reads (nothing for a real one). ``judging``: a side call, whose
        reply is a stated score of ``peer_answers`` (the answers it judges), not an answer."""
        if not self.simulated:  # only the simulated model is ever shown the gold answer
            return {}
        question = turn.question
        return {
            "gold": question.gold,
            "task": question.task,
            "n_choices": len(question.choices) or 4,
            "peer_answers": list(answers),
            "own_answer": turn.own_answer if kind != "summary" else None,
            "kind": kind,
            "judging": turn.is_side,
        }

    def _seed(self, turn: Turn) -> int:
        """An agent turn's sampling seed: per agent, question and round; round 0 under
        ``--first-round-seed`` when it is set (the same first answers whatever ``--seed`` is).
        A side call's seed is salted by its stage and the agents it judges (as summary calls are
        by their group), so the agent's reviews of different peers, and its turn, all differ."""
        spec = self.spec
        if turn.is_side:
            call = turn.call
            return call_seed(spec.seed, turn.key, turn.round, f"side:{call.stage}:{','.join(map(str, call.peers))}")
        if turn.round == 0 and spec.first_seed is not None:
            if spec.first_key_seed is None:  # RunConfig.agent_specs sets both from --first-round-seed
                raise ValueError(f"agent {self.agent_id}: AgentSpec.first_seed is set without first_key_seed")
            return call_seed(spec.first_seed, question_key(spec.first_key_seed, turn.question.qid), 0)
        return call_seed(spec.seed, turn.key, turn.round)

    def request(self, turn: Turn) -> tuple[GenRequest, Message | None]:
        """The generation request of a turn, and (for an agent turn in the paper layout) the new
        user message for its transcript.

        A question's image goes with every request about it (agent turns and summaries), once, in
        the request's first user message (:func:`engine.messages.with_image`); the user message
        returned for the transcript is text."""
        call = turn.call
        if turn.is_summary:
            text = summary_content(self.prompts, turn.question.text, call)
            return GenRequest(
                messages=with_image([{"role": "user", "content": text}], turn.question.image),
                temperature=self.spec.temperature,
                top_p=self.spec.top_p,
                max_tokens=self.spec.max_tokens,
                seed=call_seed(self.spec.seed, turn.key, turn.round, f"summary:{call.group}"),
                meta=self._oracle(turn, call.answers, "summary"),
                context_overflow=self.spec.context_overflow,
            ), None
        msgs, user = build_messages(
            self.prompts,
            turn.question.text,
            call.stage,
            turn.history,
            call.peer_texts,
            system_prompt=self.spec.system_prompt,
            memory=call.memory,
            values=call.values,
            image=turn.question.image,
            boards=call.boards,
        )
        return GenRequest(
            messages=msgs,
            temperature=self.spec.temperature,
            top_p=self.spec.top_p,
            max_tokens=self.spec.max_tokens,
            seed=self._seed(turn),
            meta=self._oracle(turn, call.peer_answers, call.stage),
            context_overflow=self.spec.context_overflow,
        ), (user if call.boards is None else None)  # a shared-layout turn is rebuilt from its boards

    def record(self, turn: Turn, req: GenRequest, res: GenResult, user: Message | None = None) -> TurnResult:
        """The turn's result: the call record (answer parsed from the reply) and its user message."""
        answer = None
        if res.error is None and not turn.is_side:  # a side call (a review, a score) states no answer
            # a reply cut off at the token limit counts only a marked answer, never its last number
            q = turn.question
            answer = extract_answer(
                res.text, q.task, marked_only=res.finish_reason == "length", choices=q.choices, question=q.text
            )
        call, summary = turn.call, turn.is_summary
        keys, texts = stored_messages(req.messages) if self.store_prompts else (None, {})
        return TurnResult(
            CallRecord(
                question_id=turn.question.qid,
                round=turn.round,
                agent_id=SUMMARIZER if summary else self.agent_id,
                kind=call.stage,
                model=self.spec.model,
                peers=list(call.sources if summary else call.peers),
                text=res.text,
                answer=answer,
                prompt_tokens=res.prompt_tokens,
                completion_tokens=res.completion_tokens,
                latency_s=res.latency_s,
                finish_reason=res.finish_reason,
                error=res.error,
                seed=req.seed,
                temperature=req.temperature,
                group=call.group,
                truncated_messages=res.truncated_messages,
                side=turn.is_side,
                prompt=keys,
                cached_prompt_tokens=res.cached_prompt_tokens,
            ),
            user,
            texts,
        )


class AgentNotConfigured(RuntimeError):
    """The agent group's process has no configuration: Ray restarted it (``max_restarts``) since the
    coordinator configured it. The coordinator configures it again and resends the turn; nothing
    else was lost, since agents keep no memory."""


@actor(num_cpus=0, max_concurrency=10_000)
class AgentGroupActor:
    """A group of agents in one process. Created by the engine, reused across runs (and across
    group sizes) through :meth:`configure`."""

    def __init__(self):
        self.cores: dict[int, AgentCore] = {}
        self.setups: dict[int, AgentSetup] = {}
        # Requests to one replica made in the same event-loop turn (any hosted agent's turns in
        # any question) travel as one streamed call (actors/batching.py); keyed by replica handle.
        self._to_replica = MicroBatcher(self._open_replica_stream)
        # prompt messages whose texts this process already returned in this run: a turn's result
        # carries only new ones (the coordinator stores them; they travel through Ray once)
        self.shipped = MessageLedger()

    def configure(self, setups: list[AgentSetup]) -> int:
        """Host exactly these agents from now on (replacing any earlier run's); returns the pid."""
        self.setups = {s.agent_id: s for s in setups}
        self.cores = {
            s.agent_id: AgentCore(s.agent_id, s.spec, s.prompts, s.simulated, s.store_prompts) for s in setups
        }
        self.shipped = MessageLedger()
        return os.getpid()

    async def ready(self) -> int:
        return os.getpid()

    def where(self) -> dict[str, Any]:
        """Node id, node IP, pid and hosted agent ids of this actor (the run's placement record)."""
        return {**here(), "pid": os.getpid(), "agents": sorted(self.cores)}

    async def _open_replica_stream(
        self, replica: Any, requests: list[GenRequest]
    ) -> AsyncIterator[list[tuple[int, Any]]]:
        async for ref in replica.generate_stream.remote(requests):
            yield await ref

    async def _generate(self, setup: AgentSetup, replica: Any, req: GenRequest) -> GenResult:
        """``replica``'s reply. A replica that dies mid-request is restarted by Ray; the request
        is sent again, at most ``retries`` times (same seed, so the same reply), after which it
        is an error result (recorded as an error row), not an exception."""
        for _attempt in range(setup.retries + 1):
            try:
                return await self._to_replica.submit(replica, req)
            except ray.exceptions.RayActorError as exc:
                error = exc
        return GenResult(
            "",
            0,
            0,
            0.0,
            "error",
            f"replica unavailable after {setup.retries + 1} attempts: {type(error).__name__}: {error}"[:2000],
        )

    @ray.method(max_task_retries=0)
    async def turns(self, turns: list[Turn]):
        """Several turns of hosted agents at once (the coordinator's micro-batch); yields lists
        of (index, :class:`TurnResult` or exception) as turns end."""
        if not self.cores:
            raise AgentNotConfigured(f"agent process {os.getpid()} was restarted and has no configuration")
        async for chunk in serve_stream(turns, self.turn):
            yield chunk

    async def turn(self, turn: Turn) -> TurnResult:
        agent = turn.call.agent
        core, setup = self.cores[agent], self.setups[agent]  # a turn for an agent not hosted here is a bug
        req, user = core.request(turn)
        if turn.round == 0 and not turn.is_summary and not turn.is_side and setup.cache is not None:
            out = await self._first_round(core, setup, turn, req, user)
        else:
            out = core.record(turn, req, await self._generate(setup, setup.serving(turn), req), user)
        out.messages = self.shipped.new(out.messages)
        return out

    async def _first_round(
        self, core: AgentCore, setup: AgentSetup, turn: Turn, req: GenRequest, user: Message | None
    ) -> TurnResult:
        """Round 0 through the cache: a hit is recorded with the original's text and token counts
        and ``reused=True``, its ``cached_prompt_tokens`` null (no request was made, so no prefix
        cache served it; the original's count says how that run's cache stood); on a miss this
        agent generates and publishes the reply."""
        ckey = first_round_key(req, core.spec.model, setup.cache_namespace)
        res = await setup.cache.acquire.remote(ckey)
        if res is not None:
            out = core.record(turn, req, res, user)
            out.record.reused = True
            out.record.cached_prompt_tokens = None
            return out
        res = None
        try:
            res = await self._generate(setup, setup.serving(turn), req)
        finally:  # always release the key, so agents waiting on it never hang
            await setup.cache.put.remote(ckey, res)
        return core.record(turn, req, res, user)
