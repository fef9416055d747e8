"""The agent actor: one debate agent's memory and prompts, bound to one replica.

It reserves no CPU (``num_cpus=0``): it only builds prompts and waits on its replica. It keeps a
transcript per question in flight (dropped with ``forget`` when the question ends), builds the
turn's messages from :mod:`engine.prompts`, sends them to the replica, parses the answer and
returns a :class:`~engine.records.CallRecord`.
"""

from __future__ import annotations

from typing import Any

import ray

from engine.config import AgentSpec
from engine.debate import call_seed
from engine.extract import extract_answer
from engine.prompts import PromptSet, build_messages
from engine.records import CallRecord, GenRequest, Message, Turn
from engine.tasks import Question


class AgentCore:
    """The pure part of an agent (no Ray): memory per question and turn execution."""

    def __init__(self, agent_id: int, spec: AgentSpec, prompts: PromptSet, forgetting: bool, simulated: bool):
        self.agent_id = agent_id
        self.spec = spec
        self.prompts = prompts
        self.forgetting = forgetting
        self.simulated = simulated
        self.memory: dict[str, list[Message]] = {}
        self.last_answer: dict[str, str | None] = {}

    def request(self, question: Question, turn: Turn, peers: list[tuple[int, str, str | None]], key: int) -> tuple[GenRequest, Message]:
        history = self.memory.setdefault(question.qid, [])
        msgs, user = build_messages(
            self.prompts,
            question.text,
            turn.kind,
            history,
            [(j, text) for j, text, _ in peers],
            system_prompt=self.spec.system_prompt,
            forgetting=self.forgetting,
        )
        meta: dict[str, Any] = {}
        if self.simulated:  # only the simulated model is ever shown the gold answer
            meta = {
                "gold": question.gold,
                "task": question.task,
                "n_choices": len(question.choices) or 4,
                "peer_answers": [a for _, _, a in peers],
                "own_answer": self.last_answer.get(question.qid),
            }
        req = GenRequest(
            messages=msgs,
            temperature=self.spec.temperature,
            top_p=self.spec.top_p,
            max_tokens=self.spec.max_tokens,
            seed=call_seed(self.spec.seed, key, turn.round),
            meta=meta,
        )
        return req, user

    def record(self, question: Question, turn: Turn, user: Message, req: GenRequest, res) -> CallRecord:
        answer = None
        if res.error is None:
            answer = extract_answer(res.text, question.task, len(question.choices) or 4)
            history = self.memory.setdefault(question.qid, [])
            history.append(user)
            history.append({"role": "assistant", "content": res.text})
            self.last_answer[question.qid] = answer
        return CallRecord(
            question_id=question.qid,
            round=turn.round,
            agent_id=self.agent_id,
            kind=turn.kind,
            model=self.spec.model,
            peers=list(turn.peers),
            text=res.text,
            answer=answer,
            prompt_tokens=res.prompt_tokens,
            completion_tokens=res.completion_tokens,
            latency_s=res.latency_s,
            finish_reason=res.finish_reason,
            error=res.error,
            seed=req.seed,
            temperature=req.temperature,
        )

    def forget(self, qid: str) -> None:
        self.memory.pop(qid, None)
        self.last_answer.pop(qid, None)


@ray.remote(num_cpus=0, max_concurrency=10_000)
class AgentActor:
    def __init__(self, agent_id: int, spec: AgentSpec, prompts: PromptSet, forgetting: bool, simulated: bool, replica):
        self.core = AgentCore(agent_id, spec, prompts, forgetting, simulated)
        self.replica = replica

    async def step(self, question: Question, turn: Turn, peers: list[tuple[int, str, str | None]], key: int) -> CallRecord:
        req, user = self.core.request(question, turn, peers, key)
        res = await self.replica.generate.remote(req)
        return self.core.record(question, turn, user, req, res)

    async def ready(self) -> int:
        return self.core.agent_id

    async def forget(self, qid: str) -> None:
        self.core.forget(qid)
