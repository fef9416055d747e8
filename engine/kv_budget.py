"""How many questions the replicas' KV caches hold: one question's peak KV tokens, in closed form,
and the limit on questions in flight they give.

A question's prompts are worth keeping in a replica's prefix cache from one call to the next: an
agent's transcript under ``--prompt-layout paper``, the text all readers of a round share under
``shared``. With more questions in flight than the caches hold, vLLM evicts the oldest blocks, a
question's shared prefix included, before the calls that would reuse them come, and computes them
again. So the coordinator keeps at most

    min(--max-concurrent-questions, min over models m of K_m x capacity_m // KV_m),  at least 1

questions in flight (:func:`in_flight_limit`), where K_m is model m's replicas, capacity_m the
smallest KV cache among them in tokens (a replica's ``settings["kv_cache_tokens"]``: vLLM's; a
backend without one reports none and sets no limit) and KV_m the estimate for the question's
agents on model m (:meth:`QuestionKV.tokens`). Under ``paper`` each replica serves 1/K_m of every
question's agents; under ``shared`` whole rounds of 1/K_m of the questions: K_m x capacity_m in
both.

The estimate (:func:`question_kv`) takes the cost model's constants (:mod:`engine.cost_model`: g,
f, a1..a4, the system prompt; measured as the sweep plan measures them, :class:`engine.plan.Planner`),
the mean question length Q and the reply length C (:func:`engine.plan.reply_tokens`):

* ``paper`` layout, the MAD family (cot, sc, mad, sparse, probmad) and GroupDebate: the largest
  round's tokens (prompt and completion of its calls: the protocol's closed-form cost over t+1
  rounds minus over t, so a round's summary calls count with the round that reads them), with
  the first call's prompt (g + s' + f + a1 + Q, which begins every agent's prompt) counted once,
  not once per agent. Under full memory the last round's prompts hold the agents' whole
  transcripts, so this is the question's KV at its end.
* ``shared`` layout, MAD and GroupDebate: the first call's prompt once, every board the memory
  keeps once (MAD: one board of the N replies per earlier round, only the newest under memory
  ``last``; GroupDebate: a round's boards of its groups, one round's or, under memory ``full``,
  every earlier round's; plus the group summaries' calls), and each agent's own part and reply.
  A board's framing is taken as the debate prompt's template (a2) and an entry's as a shown
  reply's (a3), each larger than the shared layout's own texts, so it errs high.
* every other protocol (and a layout or memory not above): all tokens the cost model predicts for
  the question (prompt and completion of every call, none shared): an upper bound, since a
  question never holds more than it computed. A protocol without a cost model gets no estimate
  and sets no limit.

Units: on the simulated backend its whitespace tokens (the estimate is exact against its counts
for MAD). A real tokenizer counts more tokens than words, so there the template and question
parts are multiplied by :data:`WORD_TOKENS`; C is then ``--max-tokens``, every reply as long as
allowed, so the estimate errs high and the limit low.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from engine.cost_model import NotCovered, Sizes, first_call
from engine.cost_predict import predict
from engine.plan import Planner, reply_tokens
from engine.protocols.layout import PROMPT_LAYOUT
from engine.protocols.shared import resolve_memory
from engine.word_tokens import count_words
from topologies.groups import parse_group_sizes, stage_plan

if TYPE_CHECKING:
    from engine.config import RunConfig
    from engine.tasks import Question

WORD_TOKENS = 1.5  # a real tokenizer's tokens per whitespace word of templates and questions (English ~1.3)
PEAK_ROUND = ("cot", "sc", "mad", "sparse", "probmad", "group")  # protocols whose rounds the closed form splits
_SAMPLE = 1000  # questions whose mean length stands for all


@dataclass(frozen=True)
class QuestionKV:
    """One question's peak KV tokens on a model's replica: ``shared`` once (what the question's
    calls there share), ``per_agent`` for each of its agents there; ``how``: which estimate
    (module docstring) made it."""

    shared: float
    per_agent: float
    how: str

    def tokens(self, agents: int) -> float:
        """The question's KV tokens with ``agents`` of its agents on the replica."""
        return self.shared + agents * self.per_agent


def _predict(protocol: str, s: Sizes, n: int, rounds: int, q: float, c: float, options: dict[str, Any]) -> float:
    return predict(protocol, s, n, rounds, q, c, **options).total


def _peak_round(
    protocol: str, s: Sizes, n: int, rounds: int, q: float, c: float, options: dict[str, Any]
) -> QuestionKV:
    """Paper layout: the largest round's tokens, the first call's prompt once (module docstring)."""
    totals = [0.0] + [_predict(protocol, s, n, t, q, c, options) for t in range(1, rounds + 1)]
    peak = max(b - a for a, b in zip(totals, totals[1:]))
    first = first_call(s, q)
    return QuestionKV(first, (peak - n * first) / n, "largest round, the first prompt shared")


def _shared_mad(s: Sizes, n: int, rounds: int, q: float, c: float, memory: str) -> QuestionKV:
    """Shared layout, MAD: the first prompt and the kept boards once, each agent's part and reply."""
    board = s.a2 + n * (s.a3 + c)
    kept = rounds - 1 if memory in ("full", "summary") else 1
    summary = 0.0
    if memory.startswith("summary"):  # one summary call of the whole board per round
        (summ,) = s.need("mad_summary")
        summary = s.g + s.f + summ.tokens(q) + summ.views * n * (s.a3 + c) + c
    return QuestionKV(first_call(s, q) + kept * board + summary, s.a2 + c, "shared boards once, each agent's part")


def _shared_group(s: Sizes, n: int, rounds: int, q: float, c: float, options: dict[str, Any]) -> QuestionKV:
    """Shared layout, GroupDebate: the first prompt, the kept rounds' boards (every group's, or the
    summaries') and the group summaries' calls once, each agent's part and reply."""
    (summ,) = s.need("gd_summary")
    groups = len(parse_group_sizes(options.get("groups"), n))
    plan = stage_plan(rounds, int(options.get("stage_rounds") or 2))
    board = max(groups * s.a2 + n * (s.a3 + c), s.a2 + groups * (s.block + c))
    memory = resolve_memory(options.get("memory"), bool(options.get("forgetting")), "last")
    kept = rounds - 1 if memory == "full" else 1
    summaries = 0.0
    if any(rp.summarize_after for rp in plan):
        summaries = groups * (s.g + s.f + summ.tokens(q) + c) + summ.views * n * (s.a3 + c)
    return QuestionKV(first_call(s, q) + kept * board + summaries, s.a2 + c, "shared boards once, each agent's part")


def question_kv(
    protocol: str, s: Sizes, n_agents: int, rounds: int, q: float, c: float, layout: str = "paper", **options: Any
) -> QuestionKV | None:
    """One question's peak KV tokens (module docstring), in the units of ``s``; None where the
    cost model covers neither the protocol nor this setting (:class:`NotCovered`). ``options``:
    the run's protocol options, as :func:`engine.cost_predict.predict` takes them."""
    try:
        if layout == "shared" and rounds > 1 and protocol == "mad" and options.get("talk") != "one-by-one":
            memory = resolve_memory(options.get("memory"), bool(options.get("forgetting")), "full")
            return _shared_mad(s, n_agents, rounds, q, c, memory)
        if layout == "shared" and rounds > 1 and protocol == "group":
            return _shared_group(s, n_agents, rounds, q, c, options)
        if protocol in PEAK_ROUND and (layout == "paper" or protocol in ("cot", "sc") or rounds == 1):
            return _peak_round(protocol, s, n_agents, rounds, q, c, options)
        total = _predict(protocol, s, n_agents, rounds, q, c, options)
    except NotCovered:
        return None
    return QuestionKV(0.0, total / n_agents, "every token of the question, none shared")


def real_tokens(at_c: QuestionKV, at_zero: QuestionKV, factor: float = WORD_TOKENS) -> QuestionKV:
    """``at_c`` (replies of C tokens) with its parts other than replies (``at_zero``: the same
    estimate with C = 0) multiplied by ``factor``: whitespace words counted as a real tokenizer's tokens."""
    return replace(
        at_c,
        shared=at_c.shared + (factor - 1) * at_zero.shared,
        per_agent=at_c.per_agent + (factor - 1) * at_zero.per_agent,
    )


def estimate_for(cfg: RunConfig, questions: list[Question]) -> QuestionKV | None:
    """:func:`question_kv` of a run debating ``questions`` (at least one), as the sweep plan
    measures prompts; for a real model's tokens (:func:`real_tokens`) unless ``cfg`` is simulated."""
    sample = questions[:_SAMPLE]
    q = sum(count_words(x.text) for x in sample) / len(sample)
    c, _ = reply_tokens(cfg)
    sizes = Planner().sizes(cfg, sample[0].task)
    options = {name: cfg.value(name) for name in cfg.options_read()}
    layout = cfg.option(PROMPT_LAYOUT)

    def at(reply: float) -> QuestionKV | None:
        return question_kv(cfg.experiment.protocol, sizes, cfg.n_agents, cfg.n_rounds, q, reply, layout, **options)

    kv, zero = at(c), at(0)
    if kv is None or zero is None or cfg.simulated:
        return kv
    return real_tokens(kv, zero)


@dataclass(frozen=True)
class ModelCache:
    """One model's replicas as the limit sees them: how many, the smallest KV cache among them in
    tokens (None: not reported) and the question's agents on the model."""

    model: str
    replicas: int
    capacity: int | None
    agents: int


@dataclass(frozen=True)
class InFlight:
    """The questions in flight a run allows (:func:`in_flight_limit`): ``limit``, the one-line
    ``reason``, and per model its KV tokens per question and the questions its caches hold."""

    limit: int
    reason: str
    per_model: dict[str, dict[str, Any]]

    def engine(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The runs row's ``engine`` entries with what the limit used: for a model whose replicas
        report a KV cache (``kv_cache_tokens``), one question's estimated KV tokens there
        (``kv_question_tokens``, None without an estimate) and the questions its replicas hold
        (``kv_questions``); and ``questions_in_flight``, the limit, in every entry."""
        return [
            {**e, **self.per_model.get(str(e.get("model")), {}), "questions_in_flight": self.limit} for e in entries
        ]


def in_flight_limit(
    max_questions: int, models: list[ModelCache], kv: QuestionKV | None, use_kv: bool = True
) -> InFlight:
    """``min(max_questions, min over models of replicas x capacity // KV)``, at least 1 (module
    docstring); a model without a reported capacity, or no estimate, limits nothing. ``use_kv``
    False (``--no-kv-in-flight``): ``max_questions`` alone, the estimates still reported."""
    per_model: dict[str, dict[str, Any]] = {}
    bounds: list[tuple[int, str]] = []
    for m in models:
        if m.capacity is None:
            continue
        tokens = None if kv is None else max(1, round(kv.tokens(m.agents)))
        held = None if tokens is None else m.replicas * m.capacity // tokens
        per_model[m.model] = {"kv_question_tokens": tokens, "kv_questions": held}
        if held is not None:
            what = (
                f"the KV caches of {m.model} ({m.replicas} replica(s) x {m.capacity:,} tokens) hold {held} "
                f"questions of ~{tokens:,} tokens"
            )
            bounds.append((held, what))
    flag = f"--max-concurrent-questions {max_questions}"
    if not bounds:
        reported = any(m.capacity is not None for m in models)
        why = "no estimate of a question's KV tokens" if reported else "the replicas report no KV cache size"
        return InFlight(max_questions, f"{max_questions} questions in flight ({flag}; {why})", per_model)
    held, what = min(bounds)
    if not use_kv:
        return InFlight(
            max_questions, f"{max_questions} questions in flight ({flag}; --no-kv-in-flight: {what})", per_model
        )
    limit = max(1, min(max_questions, held))
    if limit == max_questions:
        return InFlight(limit, f"{limit} questions in flight ({flag}; {what})", per_model)
    assert kv is not None  # bounds come from an estimate
    reason = f"{limit} questions in flight, not {max_questions} ({flag}): {what} (estimate: {kv.how})"
    return InFlight(limit, reason, per_model)


def plan_in_flight(cfg: RunConfig, questions: list[Question], capacity: dict[str, tuple[int, int | None]]) -> InFlight:
    """The run's limit (:func:`in_flight_limit`): ``capacity`` gives each model's replicas and their
    smallest KV cache in tokens (None: not reported)."""
    agents = Counter(spec.model for spec in cfg.agent_specs())
    models = [ModelCache(m, k, cap, agents.get(m, 0)) for m, (k, cap) in capacity.items()]
    reported = any(m.capacity is not None for m in models)
    kv = estimate_for(cfg, questions) if reported and questions else None
    return in_flight_limit(cfg.tuning.max_concurrent_questions, models, kv, cfg.tuning.kv_in_flight)


__all__ = [
    "PEAK_ROUND",
    "WORD_TOKENS",
    "InFlight",
    "ModelCache",
    "QuestionKV",
    "estimate_for",
    "in_flight_limit",
    "plan_in_flight",
    "question_kv",
    "real_tokens",
]
