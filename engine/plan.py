"""What a sweep will cost before it runs: predicted model calls and tokens per cell.

``debate sweep SWEEP.yaml --out DIR --list`` shows, next to each cell's status, the calls and
tokens the closed-form cost model (:mod:`engine.cost_model`, :func:`engine.cost_predict.predict`)
predicts per question and for the cell's questions, the cell's prompt tokens and those left to
compute after a perfect prefix cache (``computed``, :func:`run_computed`; :mod:`engine.prefix`
has the definition), and the sweep's totals. This module is the planner (:class:`Planner`; the
KV and memory checks of a run use it too); :mod:`app.plan_table` lays its table out. Nothing
here loads a model or starts Ray.

The numbers are in *whitespace tokens*: prompts are measured with the simulated backend's counter
(:mod:`engine.word_tokens`: the words of the templates and the question, plus 4 tokens of framing
per message and 3 per prompt), and a question's length ``Q`` is its words, averaged over the cell's
questions (the cost is linear in ``Q``, so the mean gives the cell's exact total). A reply's
length ``C`` is ``--sim-reply-tokens`` on the simulated backend (cut to ``--max-tokens``, as the
simulator cuts it); on any other backend it is ``--max-tokens``: every reply as long as it may be,
an upper bound on its length, while a real tokenizer counts a text's tokens differently from its
words (usually more), so those numbers are a rough size, marked ``~``.

Marks (:data:`MARKS`): none for an exact number (the simulated backend gives exactly these calls
and tokens), ``≤`` for an upper bound (S2-MAD: no skips, no dedup, no early stop) and ``~`` for an
estimate (ProbMAD's random reads, CortexDebate's pruning, RECONCILE's answer groups and consensus
stop; any backend but the simulated one; per-agent ``agent_settings``); a protocol's kind is its
spec's ``cost_kind``. A cell without a prediction (no cost model, a topology the closed form does
not cover, a data set that cannot be read) shows ``—`` and says why.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine import cost_predict, footprint
from engine.cost_model import Cost, NotCovered, Sizes, first_computed
from engine.dataset_routing import experiment_questions
from engine.errors import UserError
from engine.prefix import computed_prefill
from engine.prompts import PromptSet, build_messages
from engine.protocols import SPECS
from engine.word_tokens import WordTokenizer, count_tokens, count_words

if TYPE_CHECKING:
    from engine.config import RunConfig
    from engine.tasks import Question

MARKS = {"exact": "", "bound": "≤", "estimate": "~"}
_ORDER = ("exact", "bound", "estimate")  # a sum of numbers is as weak as its weakest part


@dataclass(frozen=True)
class CellPlan:
    """A cell's prediction. ``per_question`` None: no prediction, ``note`` says why.

    ``question_tokens``: the mean whitespace tokens of its questions (``Q``); ``reply_tokens`` the
    reply length assumed (``C``); ``calls_kind`` / ``tokens_kind`` / ``computed_kind``: ``exact``,
    ``bound`` or ``estimate`` (:data:`MARKS`). ``computed``: the cell's prompt tokens left to
    compute after a perfect prefix cache (:func:`run_computed`; None: not covered)."""

    n_questions: int | None
    per_question: Cost | None = None
    question_tokens: float | None = None
    reply_tokens: int | None = None
    calls_kind: str = "exact"
    tokens_kind: str = "exact"
    note: str | None = None
    computed: float | None = None  # the cell's prompt tokens left after a perfect prefix cache (run_computed)
    computed_kind: str = "exact"

    @property
    def prompt(self) -> float | None:
        """Predicted prompt tokens of all the cell's questions."""
        if self.per_question is None or self.n_questions is None:
            return None
        return self.per_question.prompt_tokens * self.n_questions

    @property
    def calls(self) -> float | None:
        """Predicted calls of all the cell's questions."""
        if self.per_question is None or self.n_questions is None:
            return None
        return self.per_question.calls * self.n_questions

    @property
    def tokens(self) -> float | None:
        """Predicted prompt + completion tokens of all the cell's questions."""
        if self.per_question is None or self.n_questions is None:
            return None
        return self.per_question.total * self.n_questions


def weakest(kinds: Iterable[str]) -> str:
    """The kind of a sum: ``estimate`` if any part is one, else ``bound`` if any is, else ``exact``."""
    return max(kinds, key=_ORDER.index, default="exact")


def reply_tokens(cfg: RunConfig) -> tuple[int, str]:
    """The reply length ``C`` assumed for ``cfg`` and where it comes from (for the header)."""
    if cfg.simulated:
        return min(cfg.value("sim_reply_tokens"), cfg.sampling.max_tokens), "sim_reply_tokens"
    return cfg.sampling.max_tokens, "max_tokens"


class Planner:
    """Predicts cells (:meth:`plan`), loading each data set and measuring each prompt set once."""

    def __init__(self) -> None:
        self._questions: dict[tuple[Any, ...], list[Question] | str] = {}
        self._sizes: dict[tuple[Any, ...], Sizes] = {}

    def questions(self, cfg: RunConfig) -> list[Question] | str:
        """The questions ``cfg`` debates, or the message of why they cannot be read."""
        seed = cfg.experiment.seed if cfg.experiment.dataset == "arithmetic" else None  # only arithmetic depends on it
        key = (cfg.experiment.dataset, cfg.experiment.task, cfg.experiment.limit, cfg.experiment.offset, seed)
        if key not in self._questions:
            try:
                self._questions[key] = experiment_questions(cfg.experiment)
            except UserError as exc:
                self._questions[key] = f"--dataset {cfg.experiment.dataset}: {exc}"
        return self._questions[key]

    def sizes(self, cfg: RunConfig, task: str) -> Sizes:
        """The cost model's constants for ``task``'s prompts as ``cfg`` sets them, in whitespace tokens."""
        key = (task, json.dumps(cfg.experiment.prompts, sort_keys=True, default=str), cfg.sampling.system_prompt)
        if key not in self._sizes:
            prompts = PromptSet.for_task(task, cfg.experiment.prompts)
            self._sizes[key] = cost_predict.measure(prompts, count_words, count_tokens, cfg.sampling.system_prompt)
        return self._sizes[key]

    def plan(self, cfg: RunConfig) -> CellPlan:
        """The prediction for one (valid) cell's config."""
        questions = self.questions(cfg)
        if isinstance(questions, str):
            return CellPlan(None, note=questions)
        return self.predict(cfg, questions)

    def predict(self, cfg: RunConfig, questions: list[Question]) -> CellPlan:
        """The prediction for a (valid) config debating ``questions`` (at least one)."""
        spec = SPECS[cfg.experiment.protocol]
        n = len(questions)
        if spec.cost is None:
            return CellPlan(n, note=f"no cost model for --protocol {cfg.experiment.protocol}")
        q = sum(count_words(x.text) for x in questions) / n
        c, _ = reply_tokens(cfg)
        options = {name: cfg.value(name) for name in cfg.options_read()}
        options["n_models"] = len(cfg.run_models())  # a shared layout's summaries: one per model
        try:
            sizes = self.sizes(cfg, questions[0].task)
            cost = cost_predict.predict(cfg.experiment.protocol, sizes, cfg.n_agents, cfg.n_rounds, q, c, **options)
        except NotCovered as exc:  # a setting the closed form does not cover (sparse on a ring)
            topology = cfg.value("topology")
            why = f"--topology {topology}" if topology not in (None, "regular") else str(exc)
            return CellPlan(n, question_tokens=q, reply_tokens=c, note=f"no cost model for {why}")
        kind = spec.cost_kind
        if cfg.experiment.agent_settings:  # per-agent prompts or lengths: the formulas take one of each
            kind = "estimate"
        tokens_kind = kind if cfg.simulated else "estimate"
        computed = run_computed(cfg, questions, sizes, cost)
        return CellPlan(
            n,
            cost,
            q,
            c,
            calls_kind=kind,
            tokens_kind=tokens_kind,
            computed=computed,
            computed_kind=weakest((tokens_kind, cost.computed_kind)),
        )


def run_computed(cfg: RunConfig, questions: list[Question], sizes: Sizes, cost: Cost) -> float | None:
    """The computed prefill of ``cfg`` debating ``questions`` after a perfect prefix cache
    (:mod:`engine.prefix`), from the per-question prediction ``cost``: its round-0 part, which
    assumes every question's first prompt shares only :func:`~engine.cost_model.run_head` with
    the earlier ones, is replaced by the questions' own first prompts run through
    :func:`engine.prefix.computed_prefill` (questions that begin alike share more; the first
    question computes the head), once per model. None when ``cost`` has no computed prefill."""
    if cost.computed_prompt_tokens is None:
        return None
    prompts = PromptSet.for_task(questions[0].task, cfg.experiment.prompts)
    tokens = WordTokenizer()
    firsts = [
        tokens(build_messages(prompts, q.text, "first", [], [], cfg.sampling.system_prompt)[0]) for q in questions
    ]
    n, m = len(questions), max(1, min(len(cfg.run_models()), cfg.n_agents))
    q = sum(count_words(x.text) for x in questions) / n
    per_question = cost.computed_prompt_tokens - m * first_computed(sizes, q)
    return n * per_question + m * (sum(computed_prefill(firsts)) + cost.computed_per_run)


IN_FLIGHT_SAMPLE = 1000  # questions whose mean length stands for all (check_in_flight)


def check_in_flight(cfg: RunConfig, questions: list[Question]) -> None:
    """The prompts and replies of the questions debated at once fit in memory
    (:mod:`engine.footprint`; the cost model's prediction for the first :data:`IN_FLIGHT_SAMPLE`
    questions); else a ConfigError naming ``--max-concurrent-questions`` and the flags that set a
    question's tokens."""
    if not questions:
        return
    sample = questions[:IN_FLIGHT_SAMPLE]
    c, source = reply_tokens(cfg)
    per_question = Planner().predict(cfg, sample).per_question
    if per_question is not None:
        tokens = per_question.total
    else:
        q = sum(count_words(x.text) for x in sample) / len(sample)
        tokens = cfg.n_agents * cfg.n_rounds * (q + c)
    k = min(cfg.tuning.max_concurrent_questions, len(questions))
    reply_flag = "--" + source.replace("_", "-")
    footprint.check_fits(
        k * tokens * footprint.TEXT_BYTES_PER_TOKEN,
        f"{k} questions in flight (--max-concurrent-questions) of about {tokens:,.0f} tokens of prompts and "
        f"replies each (--agents {cfg.n_agents}, --rounds {cfg.n_rounds}, {reply_flag} {c})",
        f"lower --max-concurrent-questions (results stay the same), --agents, --rounds or {reply_flag}",
    )
