"""Run a protocol in this process, without Ray: for tests and cost planning.

It drives the same debate the coordinator actor drives (:func:`engine.debate.debate`, the
engine's one protocol driver) with in-process hooks: each turn is rendered and parsed by an
:class:`AgentCore` (the pure part of the agent actor) and answered by ``backend`` one request at
a time, in the order the protocol asks. The question rows are those a Ray run writes (same
columns; ``attempt`` is ``"local"``), and with ``out`` they are written as a Ray run's writer
writes them, through the run's sink (``--sink``, :mod:`engine.results.sinks`). Metrics registered
in this process (:func:`engine.metrics.register_metric`) are computed here. Use
``actors.driver.run`` for real runs; this exists so that protocol behaviour, token accounting and
the results layer's plug points can be checked quickly and deterministically (with the
SIMULATED backend, whose rows say so).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from actors.agent_actor import AgentCore
from engine.accounting import summarize
from engine.config import RunConfig
from engine.debate import DebateLog, debate
from engine.metrics import runs_columns
from engine.prompts import PromptSet
from engine.protocols import get_protocol
from engine.records import CallRecord, Turn, TurnResult
from engine.results.sinks import Sink, sink_class
from engine.tasks import Question


def run_local(
    cfg: RunConfig,
    questions: list[Question],
    backend,
    similarity: Callable[[list[str]], Any] | None = None,
    out: str | Path | None = None,
) -> list[tuple[dict[str, Any], DebateLog]]:
    """Debate every question sequentially; returns (question row, log) per question.

    ``backend``: one backend for every agent, or a mapping model name -> backend (each agent's
    calls go to its model's, as the driver's replicas of each model answer them). ``out``: a run
    directory to write the rows to, through ``sink_class(cfg.output.sink)`` (:class:`LocalWriter`);
    None writes nothing."""
    get_protocol(cfg.experiment.protocol)  # first: importing the protocol registers its prompt stages
    prompts = PromptSet.for_task(questions[0].task, cfg.experiment.prompts)
    by_model = backend if isinstance(backend, Mapping) else None
    simulated = all(getattr(b, "simulated", False) for b in (by_model.values() if by_model else [backend]))
    agents = [
        AgentCore(i, spec, prompts, simulated, cfg.output.store_prompts) for i, spec in enumerate(cfg.agent_specs())
    ]
    labels = {"run_id": cfg.run_id(), "backend": cfg.sampling.backend, "simulated": simulated, "attempt": "local"}
    writer = LocalWriter(sink_class(cfg.output.sink)(out), labels) if out is not None else None

    async def call(turn: Turn) -> TurnResult:
        agent = agents[turn.call.agent]
        req, user = agent.request(turn)
        answerer = by_model[agent.spec.model] if by_model is not None else backend
        result = agent.record(turn, req, answerer.generate([req])[0], user)
        if writer is not None:
            writer.messages(result.messages)
        return result

    async def similar(texts: list[str]) -> Any:
        if similarity is None:
            raise RuntimeError(
                f"--protocol {cfg.experiment.protocol} asks for similarities: pass run_local(similarity=...)"
            )
        return similarity(texts)

    async def every_question() -> list[tuple[dict[str, Any], DebateLog]]:
        rows = []
        for q in questions:
            row, log = await debate(q, cfg, call, similar, writer.step if writer is not None else None)
            rows.append(({**row, **labels}, log))
            if writer is not None:
                writer.sink.write("questions", [rows[-1][0]])
        return rows

    started = time.perf_counter()
    done = asyncio.run(every_question())
    if writer is not None:
        writer.finish(cfg, [row for row, _ in done], time.perf_counter() - started)
    return done


class LocalWriter:
    """What :func:`run_local` writes, as the coordinator and driver of a Ray run write it: every
    row labelled with the run (``labels``: run id, backend, simulated, attempt), through ``sink``."""

    def __init__(self, sink: Sink, labels: dict[str, Any]):
        self.sink, self.labels = sink, labels
        self.started = dt.datetime.now(dt.UTC)

    def messages(self, messages: dict[str, tuple[str, str]]) -> None:
        """The prompts rows of a call's messages (the sink keeps each once per run)."""
        if messages:
            rows = [{"message": k, "role": r, "content": text, **self.labels} for k, (r, text) in messages.items()]
            self.sink.write("prompts", rows)

    def step(self, records: list[CallRecord], graph: list[dict[str, Any]]) -> None:
        """A step's call rows and graph rows (:func:`engine.debate.debate`'s ``on_step``)."""
        self.sink.write("calls", [{**rec.to_row(), **self.labels} for rec in records])
        if graph:
            self.sink.write("graphs", [{**e, **self.labels} for e in graph])

    def finish(self, cfg: RunConfig, rows: list[dict[str, Any]], wall_s: float) -> None:
        """Flush, then the runs row of a finished run: its configuration and the aggregates the
        runs table stores (:func:`engine.metrics.runs_columns`)."""
        self.sink.flush()
        self.sink.write_run(
            {
                "run_id": self.labels["run_id"],
                "protocol": cfg.experiment.protocol,
                "backend": cfg.sampling.backend,
                "simulated": self.labels["simulated"],
                "config": cfg.to_json(),
                "status": "finished",
                "started": self.started,
                "finished": dt.datetime.now(dt.UTC),
                "n_questions": len(rows),
                "wall_s": wall_s,
                **runs_columns(summarize(rows)),
            }
        )
