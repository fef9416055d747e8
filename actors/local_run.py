"""Run a protocol in this process, without Ray: for tests and cost planning.

It wires the same pieces the Ray actors use — protocol generator, :class:`AgentCore` (memory,
prompts, parsing), a backend, :class:`DebateLog` — in a plain loop, one call at a time. Use
``actors.driver.run`` for real runs; this exists so that protocol behaviour and token accounting
can be checked quickly and deterministically (with the SIMULATED backend, whose rows say so).
"""

from __future__ import annotations

from typing import Any, Callable

from actors.agent_actor import AgentCore
from engine.config import RunConfig
from engine.debate import DebateLog, question_key
from engine.prompts import PromptSet
from engine.protocols import Context, Similarity, Step, SummaryCall, get_protocol
from engine.protocols.base import drive, tie_key
from engine.tasks import Question


def run_local(cfg: RunConfig, questions: list[Question], backend, similarity: Callable[[list[str]], Any] | None = None
              ) -> list[tuple[dict[str, Any], DebateLog]]:
    """Debate every question sequentially; returns (question row, log) per question."""
    protocol = get_protocol(cfg.protocol)  # first: importing it registers its prompt stages
    prompts = PromptSet.for_task(questions[0].task, cfg.prompts)
    simulated = bool(getattr(backend, "simulated", False))
    agents = [AgentCore(i, spec, prompts, simulated) for i, spec in enumerate(cfg.agent_specs())]
    out = []
    for q in questions:
        key = question_key(cfg.seed, q.qid)
        log = DebateLog(q)

        def answer(request, q=q, key=key, log=log):
            if isinstance(request, Similarity):
                if similarity is None:
                    raise RuntimeError("this protocol needs a similarity function")
                return similarity(request.texts)
            assert isinstance(request, Step)
            replies = []
            for call in request.calls:
                agent = agents[call.agent]
                if isinstance(call, SummaryCall):
                    req = agent.summary_request(q, call, request.round, key)
                    rec = agent.record(q, request.round, call, req, backend.generate([req])[0])
                else:
                    req, user = agent.request(q, call, request.round, key)
                    rec = agent.record(q, request.round, call, req, backend.generate([req])[0], user)
                replies.append(log.add(request.round, call, rec))
            return replies

        outcome = drive(protocol(Context(question=q, cfg=cfg, key=key)), answer)
        for agent in agents:
            agent.forget(q.qid)
        out.append((log.question_row(outcome, cfg.n_agents, tie_key(cfg, key)), log))
    return out
