"""Run a protocol in this process, without Ray: for tests and cost planning.

It drives the same debate the coordinator actor drives (:func:`engine.debate.debate`, the
engine's one protocol driver) with in-process hooks: each turn is rendered and parsed by an
:class:`AgentCore` (the pure part of the agent actor) and answered by ``backend`` one request at
a time, in the order the protocol asks. The question rows are those a Ray run writes (same
columns; ``attempt`` is ``"local"``). Use ``actors.driver.run`` for real runs; this exists so
that protocol behaviour and token accounting can be checked quickly and deterministically (with
the SIMULATED backend, whose rows say so).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from actors.agent_actor import AgentCore
from engine.config import RunConfig
from engine.debate import DebateLog, debate
from engine.prompts import PromptSet
from engine.protocols import get_protocol
from engine.records import Turn, TurnResult
from engine.tasks import Question


def run_local(
    cfg: RunConfig, questions: list[Question], backend, similarity: Callable[[list[str]], Any] | None = None
) -> list[tuple[dict[str, Any], DebateLog]]:
    """Debate every question sequentially; returns (question row, log) per question.

    ``backend``: one backend for every agent, or a mapping model name -> backend (each agent's
    calls go to its model's, as the driver's replicas of each model answer them)."""
    get_protocol(cfg.experiment.protocol)  # first: importing the protocol registers its prompt stages
    prompts = PromptSet.for_task(questions[0].task, cfg.experiment.prompts)
    by_model = backend if isinstance(backend, Mapping) else None
    simulated = all(getattr(b, "simulated", False) for b in (by_model.values() if by_model else [backend]))
    agents = [
        AgentCore(i, spec, prompts, simulated, cfg.output.store_prompts) for i, spec in enumerate(cfg.agent_specs())
    ]
    labels = {"run_id": cfg.run_id(), "backend": cfg.sampling.backend, "simulated": simulated, "attempt": "local"}

    async def call(turn: Turn) -> TurnResult:
        agent = agents[turn.call.agent]
        req, user = agent.request(turn)
        answerer = by_model[agent.spec.model] if by_model is not None else backend
        return agent.record(turn, req, answerer.generate([req])[0], user)

    async def similar(texts: list[str]) -> Any:
        if similarity is None:
            raise RuntimeError(
                f"--protocol {cfg.experiment.protocol} asks for similarities: pass run_local(similarity=...)"
            )
        return similarity(texts)

    async def every_question() -> list[tuple[dict[str, Any], DebateLog]]:
        out = []
        for q in questions:
            row, log = await debate(q, cfg, call, similar)
            out.append(({**row, **labels}, log))
        return out

    return asyncio.run(every_question())
