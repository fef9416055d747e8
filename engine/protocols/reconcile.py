"""RECONCILE: Chen, Saha & Bansal, "ReConcile: Round-Table Conference Improves Reasoning via
Consensus among Diverse LLMs" (ACL 2024, arXiv 2309.13007), sec. 3; prompt as CortexDebate's
appendix F reprints it (Figure 7); details checked against the authors' code
(github.com/dinobby/ReConcile, ``utils.py``/``generation.py``).

A round-table conference of (ideally diverse: ``--models``) agents:

Phase 1, initial response generation (round 0): every agent answers the question with
  step-by-step reasoning and a confidence ``p`` in [0, 1] (Figure 7 "Initial Answer Generation",
  stage ``reconcile_first``). The confidence is read from the reply with
  :func:`engine.protocols.cortex.parse_confidence`.
Phase 2, multi-round discussion (rounds t = 1..T-1, ``T = --rounds``): every agent gets a
  *discussion prompt* (stage ``reconcile_debate``): the initial prompt again, the instruction to
  review the other agents' solutions and say which view it agrees with and why, and the previous
  round's replies *grouped by answer* — "There are k agents think the answer is X." followed by
  "One agent solution: ..." with each member's reasoning, answer and confidence
  (:func:`solutions_block`). Groups are listed largest first.
  Before each discussion round, if every agent gives the same valid answer the discussion ends
  (RECONCILE's consensus stop; ``--no-early-stop`` turns it off).
Phase 3, final answer: the confidence-weighted vote over the agents' last answers,
  ``argmax_a sum_i f(p_i) [a_i = a]``, with the recalibration ``f`` of :func:`recalibrate`
  (``--reconcile-vote weighted``, the default). ``--reconcile-vote majority`` takes the plain
  majority vote instead, which is how CortexDebate's appendix F describes its RECONCILE baseline.
  Ties are broken as every protocol's vote is (``--tie-break``;
  :func:`engine.extract.weighted_vote` has :func:`engine.extract.majority_vote`'s rule).

``Outcome.info`` has per round every agent's raw and recalibrated confidence, the weighted tally
(answer -> sum of f(p)), the weighted and the majority answer, and per discussion round the
groups shown. ``Outcome.votes_by_round`` is the chosen vote after every round, so the run's
accuracy by round grades RECONCILE's own rule (``debate rescore`` rebuilds it the same way,
``ProtocolSpec.revote``).

Facts taken from the authors' code where the paper is not explicit:

* **Everyone is shown everyone, itself included.** The code builds one discussion prompt per
  question from all agents' previous replies and sends it to every agent, so an agent reads its
  own reply in its group and the counts include it. The recorded ``peers`` (graph edges) are the
  other agents whose replies were shown (no self-loops).
* **The prompt is rebuilt each round** (a new chat per call: the initial prompt plus the
  discussion part): ``memory="none"``, no transcript.
* **Consensus is checked after every round, round 0 included**: when all agents agree after the
  initial answers there is no discussion at all.
* **The recalibration** ``f`` is the paper's: 1.0 for p = 1, 0.8 for 0.9 <= p < 1, 0.5 for
  0.8 <= p < 0.9, 0.3 for 0.6 < p < 0.8, 0.1 otherwise; a missing confidence counts as 0 (the
  code sets it to 0.0), hence 0.1. CortexDebate's eq. 2 (:func:`topologies.cortex.recalibrate`)
  cites it but is another function (bands 0.8 / 0.6 / p / 0.3), so it is not reused.

Choices where the paper is vague:

* **Convincing samples** (``--reconcile-samples FILE``; none by default). Figure 7 starts both
  prompts with ``{convincing_samples}``: human explanations that corrected a model's wrong
  answer, mined from the data set's training split (the code's ``convincing/<data set>/<model>.json``).
  The file maps a model name (as the run names it; ``"*"``: any other model) to a list of
  ``{question, explanation, answer}`` (:func:`load_samples`; checked by ``validate()``, which puts
  the checked samples into the config, so ``config.json`` records them and the run id hashes them,
  not the path). As in the code (``run.py``), each agent is shown the samples of the *other*
  models of the run, in front of both its first and its discussion prompts
  (:func:`samples_by_agent`); with one model for all agents, that model's own. Each sample is
  written as the code's text prompt does (``utils.prepare_context``): "Q: <question>" then "A:"
  with the explanation and the answer, the answer in the task's answer form (\\boxed{} or (X))
  where the code writes its JSON reply format; the code's chat models get the samples as earlier
  user/assistant turns instead. The stages show them where they say ``$samples`` (a user override
  of a stage without it drops them). ``Outcome.info["samples"]`` counts each agent's. The cost model
  leaves them out. Without the file, rows are RECONCILE without its few-shot samples.
* **Answer and confidence format.** The code asks for JSON (reasoning, answer,
  confidence_level); we keep the task's ``$format`` sentence so the engine's answer extraction
  works on every task, add the task's ``$intro`` line (the code likewise adds the options of a
  multiple-choice task), and ask for "Confidence: <number>" after the final answer.
* **All groups are shown.** The code lists the two largest groups only
  (``Counter.most_common(2)``; with its three agents that drops a reply only when all three
  answers differ); Figure 7 and the paper's "grouped answers and explanations" of all agents
  do not restrict it, so every group is listed. Equal-sized groups keep the order in which their
  answer first appears in agent order (``most_common``'s order).
* **A member** is shown as its reply text (which holds its reasoning) followed by its extracted
  answer and its stated confidence (the raw number, as the code shows ``confidence_level``;
  "unknown" when none could be read), Figure 7's "{agent_reasoning} {agent_ans}
  {agent_confidence}". The header keeps Figure 7's wording, "There are 1 agents think ...".
* **Unreadable answers.** The code replaces a reply it cannot parse by a default answer; we
  show replies without a readable answer as one last group ("There are k agents whose answer
  could not be read."); they never vote and never make a consensus. A failed call (error) shows
  nothing and does not vote; if every call of a round failed, the next round's prompt has no
  solutions listed.
* **Unreadable confidence** counts as 0 (f = 0.1, the code's rule) and is listed in
  ``info["unparsed_confidence"]`` as ``[round, agent]``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.confidence import parse_confidence
from engine.cost_model import Cost, ReconcileBlock, Sizes, sys_tokens
from engine.extract import majority_vote, tied_answers, weighted_counts, weighted_tied_answers, weighted_vote
from engine.inputs import load_yaml
from engine.options import ConfigError, Option
from engine.protocols.base import AgentCall, Context, Outcome, ProtocolGen, Reply, Step, Votes, tie_key, unanimous
from engine.protocols.shared import EARLY_STOP
from engine.protocols.spec import ProtocolSpec

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------- prompts (Figure 7)

_CONFIDENCE_ASK = (
    "Also, evaluate your confidence level (between 0.0 and 1.0) to indicate the possibility of your answer "
    'being right, and write it after your final answer as "Confidence: " followed by the number.'
)
_INITIAL = (
    "$samples$intro\nQ: $question\nPlease answer the question with step-by-step reasoning. $format\n" + _CONFIDENCE_ASK
)

STAGES = {
    # Figure 7, "Initial Answer Generation"; $samples: the convincing samples ("" without
    # --reconcile-samples; see the module docstring)
    "reconcile_first": _INITIAL,
    # Figure 7, "Debate": {initial_prompt}, the review instruction, the grouped solutions
    "reconcile_debate": (
        _INITIAL + "\n\n"
        "Carefully review the following solutions from other agents as additional information, and provide your "
        "own answer and step-by-step reasoning to the question.\n"
        "Clearly state which point of view you agree or disagree with and why.\n"
        "$groups\n"
        '$format Write your confidence level (between 0.0 and 1.0) after your final answer as "Confidence: " '
        "followed by the number."
    ),
}

UNKNOWN = "unknown"  # shown for a member's unreadable answer or confidence


def group_header(count: int, answer: str) -> str:
    """Figure 7's group line, its wording kept ("There are 1 agents think ...")."""
    return f"\nThere are {count} agents think the answer is {answer}.\n"


def unread_header(count: int) -> str:
    """The line in front of the replies whose answer could not be read (our addition)."""
    return f"\nThere are {count} agents whose answer could not be read.\n"


def member_line(text: str, answer: str | None, confidence: float | None) -> str:
    """One member of a group: Figure 7's "One agent solution: {reasoning} {answer} {confidence}"."""
    conf = UNKNOWN if confidence is None else f"{confidence:g}"
    return (
        f"One agent solution: ```{text}```\nIts answer: {UNKNOWN if answer is None else answer}. "
        f"Its confidence: {conf}.\n"
    )


@dataclass(frozen=True)
class AnswerGroup:
    """Agents (ids, in order) whose previous reply has ``answer`` (None: unreadable)."""

    answer: str | None
    agents: tuple[int, ...]


def group_replies(answers: Sequence[str | None], shown: Sequence[int]) -> list[AnswerGroup]:
    """The replies of agents ``shown`` grouped by answer: groups with a valid answer, largest
    first (equal sizes: the answer seen first in agent order first), then one group of the
    replies without a readable answer."""
    by_answer: dict[str, list[int]] = {}
    unread: list[int] = []
    for j in sorted(shown):
        answer = answers[j]
        if answer is None:
            unread.append(j)
        else:
            by_answer.setdefault(answer, []).append(j)
    ordered = sorted(by_answer.items(), key=lambda kv: -len(kv[1]))  # stable: first-seen order on ties
    groups = [AnswerGroup(a, tuple(members)) for a, members in ordered]
    if unread:
        groups.append(AnswerGroup(None, tuple(unread)))
    return groups


def solutions_block(
    groups: Sequence[AnswerGroup],
    texts: Sequence[str],
    answers: Sequence[str | None],
    confidences: Sequence[float | None],
) -> str:
    """The grouped solutions of a discussion prompt (``$groups``)."""
    out = []
    for g in groups:
        out.append(unread_header(len(g.agents)) if g.answer is None else group_header(len(g.agents), g.answer))
        out.extend(member_line(texts[j], answers[j], confidences[j]) for j in g.agents)
    return "".join(out)


# --------------------------------------------------------------------------- convincing samples

ANY_MODEL = "*"  # the samples file's entry for every model it does not name
SAMPLE_KEYS = ("question", "explanation", "answer")
_ANSWER_FORMS = {"numeric": "\\boxed{%s}", "math": "\\boxed{%s}", "choice": "(%s)", "pair": "(%s)"}


class SamplesError(ConfigError):
    """A bad ``--reconcile-samples`` file; the message names the file and the entry."""


@dataclass(frozen=True)
class Sample:
    """One convincing sample: a training question, the human explanation that corrected a
    model's wrong answer, and its gold answer."""

    question: str
    explanation: str
    answer: str


def load_samples(value: Any) -> dict[str, list[dict[str, str]]]:
    """``--reconcile-samples``: a YAML/JSON file (path) or its already loaded mapping, checked and
    made plain: model name (as ``--model``/``--models``/``agent_settings`` give it, or ``"*"`` for
    any other model) -> list of ``{question, explanation, answer}`` (strings; a number answer is
    written as a string). The same mapping for the file and for what it returns, so the run id
    (which hashes this) is the same before and after :meth:`RunConfig.validate` loads the file.
    Raises :class:`SamplesError` naming the file and the entry."""
    where = "--reconcile-samples"
    data = value
    if isinstance(value, str):
        where = f"--reconcile-samples {value}"
        data = load_yaml(value, where, SamplesError, "YAML or JSON")
    if not isinstance(data, dict) or not data:
        raise SamplesError(f"{where}: must map model names (or {ANY_MODEL!r}) to lists of samples")
    out: dict[str, list[dict[str, str]]] = {}
    for model, samples in data.items():
        if not isinstance(samples, list) or not samples:
            raise SamplesError(f"{where}: {model!r} must be a non-empty list of samples")
        rows = []
        for k, sample in enumerate(samples):
            entry = f"{where}: {model!r}[{k}]"
            if not isinstance(sample, dict) or set(sample) != set(SAMPLE_KEYS):
                got = sorted(map(str, sample)) if isinstance(sample, dict) else type(sample).__name__
                raise SamplesError(f"{entry}: needs exactly the keys {', '.join(SAMPLE_KEYS)} (got {got})")
            row = {}
            for key in SAMPLE_KEYS:
                v = sample[key]
                if isinstance(v, bool) or not isinstance(v, (str, int, float)) or not str(v).strip():
                    raise SamplesError(f"{entry}.{key}: must be a non-empty string (got {v!r})")
                row[key] = str(v)
            rows.append(row)
        out[str(model)] = rows
    return out


def answer_form(task: str, answer: str) -> str:
    """``answer`` written the way the task's ``$format`` asks for a final answer (``\\boxed{..}``
    or ``(X)``)."""
    return _ANSWER_FORMS.get(task, "%s") % answer


def samples_block(samples: Sequence[Sample], task: str) -> str:
    """``$samples``: the convincing samples in front of the question, as the authors' code writes
    them in a prompt (``utils.prepare_context``): per sample "Q: <question>" and "A:" with the
    explanation and the answer, one after another; ours writes the answer in the task's answer
    form where theirs writes their JSON reply format. Empty without samples."""
    return "".join(
        f"Q: {s.question}\nA: {s.explanation} The answer is {answer_form(task, s.answer)}.\n" for s in samples
    )


def samples_by_agent(
    loaded: Mapping[str, Sequence[Mapping[str, str]]] | None, models: Sequence[str]
) -> list[list[Sample]]:
    """The convincing samples each agent is shown (``models``: the agents' models): the samples of
    every *other* model in the run, in the order the models first appear among the agents (the
    authors' code shows Claude the samples of ChatGPT then Bard, and so on); a model without an
    entry has the ``"*"`` entry's, none without one. When all agents run one model there is no
    other model, so they are shown that model's own samples. None (no file): none."""
    if not loaded:
        return [[] for _ in models]
    distinct = list(dict.fromkeys(models))

    def of(model: str) -> list[Sample]:
        return [Sample(**s) for s in loaded.get(model, loaded.get(ANY_MODEL, ()))]

    if len(distinct) == 1:
        return [of(distinct[0]) for _ in models]
    return [[s for other in distinct if other != m for s in of(other)] for m in models]


def _check(cfg: Any) -> None:
    """Load ``--reconcile-samples`` into the config (so the run records the samples themselves and
    the coordinator reads no file) and check that every model of the run has samples."""
    if cfg.option(RECONCILE_SAMPLES) is None:
        return
    source = cfg.option(RECONCILE_SAMPLES)
    loaded = load_samples(source)
    cfg.set_value(RECONCILE_SAMPLES.name, loaded)
    if ANY_MODEL in loaded:
        return
    missing = [m for m in dict.fromkeys(a.model for a in cfg.agent_specs()) if m not in loaded]
    if missing:
        where = f"--reconcile-samples {source}" if isinstance(source, str) else "--reconcile-samples"
        raise SamplesError(
            f"{where}: no entry for model(s) {', '.join(map(repr, missing))} of this run; "
            f"add them or a {ANY_MODEL!r} entry"
        )


# --------------------------------------------------------------------------- recalibration and vote


def recalibrate(p: float | None) -> float:
    """RECONCILE's recalibration f(p) of a stated confidence (sec. 3, Phase 3):

    1.0 if p = 1.0; 0.8 if 0.9 <= p < 1.0; 0.5 if 0.8 <= p < 0.9; 0.3 if 0.6 < p < 0.8;
    0.1 otherwise (p <= 0.6). ``None`` (no readable confidence) is 0, hence 0.1, as the authors'
    code sets a missing confidence to 0.0.
    """
    if p is None or p != p:  # None or NaN
        return 0.1
    p = float(p)
    if p >= 1.0:
        return 1.0
    if p >= 0.9:
        return 0.8
    if p >= 0.8:
        return 0.5
    if p > 0.6:
        return 0.3
    return 0.1


VOTES = ("weighted", "majority")


def round_vote(mode: str, answers: Sequence[str | None], raw: Sequence[float | None], key: int | None) -> str | None:
    """The vote over one round's answers: confidence-weighted (``raw``: the stated confidences,
    recalibrated here) or the plain majority; ties broken with ``key`` (:func:`tie_key`)."""
    if mode == "majority":
        return majority_vote(list(answers), key)
    if mode != "weighted":
        raise ValueError(f"--reconcile-vote {mode!r} is not one of {', '.join(VOTES)}")
    return weighted_vote(answers, [recalibrate(p) for p in raw], key)


def round_tie(mode: str, answers: Sequence[str | None], raw: Sequence[float | None]) -> bool:
    """Whether :func:`round_vote` had more than one answer on top (then broken by ``--tie-break``):
    equal weight totals for the weighted vote, equal counts for the majority."""
    if mode == "majority":
        return len(tied_answers(list(answers))) > 1
    return len(weighted_tied_answers(answers, [recalibrate(p) for p in raw])) > 1


# --------------------------------------------------------------------------- the protocol


@dataclass
class _Round:
    """What one round's replies say: texts shown, answers, stated and recalibrated confidences."""

    texts: list[str]
    answers: list[str | None]
    raw: list[float | None]
    shown: list[int]  # agents whose call did not fail


def _read(replies: Sequence[Reply], round_: int, info: dict[str, Any], mode: str, key: int | None) -> _Round:
    raw = [None if r.error else parse_confidence(r.text) for r in replies]
    answers = [r.answer for r in replies]
    for i, r in enumerate(replies):
        if r.error is not None:
            info["failed"].append([round_, i])
        elif raw[i] is None:
            info["unparsed_confidence"].append([round_, i])
    info["confidence_raw"].append(raw)
    info["confidence"].append([None if r.error else recalibrate(p) for r, p in zip(replies, raw)])
    weights = [recalibrate(p) for p in raw]
    info["tally"].append(weighted_counts(answers, weights))
    info["weighted_answer"].append(weighted_vote(answers, weights, key))
    info["majority_answer"].append(majority_vote(answers, key))
    log.debug(
        "round %d: answers %s, confidences %s, weighted tally %s (%s vote)",
        round_,
        answers,
        raw,
        info["tally"][-1],
        mode,
    )
    return _Round([r.shown_text for r in replies], answers, raw, [i for i, r in enumerate(replies) if r.error is None])


def reconcile(ctx: Context) -> ProtocolGen:
    """RECONCILE, phases 1-3 (see the module docstring)."""
    cfg, n = ctx.cfg, ctx.n_agents
    mode = cfg.option(RECONCILE_VOTE)
    key = tie_key(ctx, ctx.key)
    info: dict[str, Any] = {
        "vote": mode,
        "confidence_raw": [],  # per round, per agent: the stated confidence or None
        "confidence": [],  # per round, per agent: f(p) (None: the call failed)
        "tally": [],  # per round: answer -> sum of f(p)
        "weighted_answer": [],  # per round
        "majority_answer": [],  # per round
        "groups": [],  # per discussion round: [{"answer", "agents"}] as shown
        "unparsed_confidence": [],  # [round, agent]
        "failed": [],  # [round, agent]
    }

    # the convincing samples each agent is shown, in both phases (the authors' code puts them in
    # front of every prompt); "" without --reconcile-samples
    samples = [""] * n
    if cfg.option(RECONCILE_SAMPLES) is not None:  # loaded by validate(); a path still loads (idempotent)
        shown = samples_by_agent(load_samples(cfg.option(RECONCILE_SAMPLES)), [a.model for a in cfg.agent_specs()])
        samples = [samples_block(s, ctx.question.task) for s in shown]
        info["samples"] = [len(s) for s in shown]  # per agent: how many samples it was shown

    # Phase 1: initial response generation
    replies = yield Step(
        0,
        [AgentCall(agent=i, stage="reconcile_first", values={"samples": samples[i]}, memory="none") for i in range(n)],
    )
    prev = _read(replies, 0, info, mode, key)
    history = [prev.answers]
    stopped = False

    # Phase 2: multi-round discussion, ended by a consensus
    for t in range(1, ctx.n_rounds):
        if cfg.option(EARLY_STOP) and unanimous(prev.answers):
            log.info("question %s: consensus on %r after round %d", ctx.question.qid, prev.answers[0], t - 1)
            stopped = True
            break
        groups = group_replies(prev.answers, prev.shown)
        info["groups"].append([{"answer": g.answer, "agents": list(g.agents)} for g in groups])
        block = solutions_block(groups, prev.texts, prev.answers, prev.raw)
        calls = []
        for i in range(n):
            others = [j for j in prev.shown if j != i]
            calls.append(
                AgentCall(
                    agent=i,
                    stage="reconcile_debate",
                    peers=others,
                    values={"groups": block, "samples": samples[i]},
                    peer_answers=[prev.answers[j] for j in others],
                    memory="none",
                )
            )
        replies = yield Step(t, calls)
        prev = _read(replies, t, info, mode, key)
        history.append(prev.answers)

    # Phase 3: the vote over every agent's last answer
    votes = [info["weighted_answer" if mode == "weighted" else "majority_answer"][r] for r in range(len(history))]
    return Outcome(
        final_answer=votes[-1],
        answers_by_round=history,
        stopped_early=stopped,
        info=info,
        votes_by_round=votes,
        tie=round_tie(mode, prev.answers, prev.raw),
    )


def revote(
    config: Mapping[str, Any],
    answers_by_round: Sequence[Sequence[str | None]],
    texts_by_round: Sequence[Sequence[str | None]],
    key: int | None,
) -> Votes:
    """The run's vote after each round, and the final one's tie, rebuilt from re-read answers and
    the calls' texts (``debate rescore``): the confidences are read again from the texts."""
    mode = config.get("reconcile_vote", RECONCILE_VOTE.default)
    raws = [[parse_confidence(t) for t in texts] for texts in texts_by_round]
    return Votes(
        [round_vote(mode, answers, raw, key) for answers, raw in zip(answers_by_round, raws)],
        round_tie(mode, answers_by_round[-1], raws[-1]),
    )


# --------------------------------------------------------------------------- spec

# --------------------------------------------------------------------------- cost model
# closed forms described in engine.cost_model's docstring


@dataclass(frozen=True)
class ReconcileShown:
    """What every agent was shown in one RECONCILE discussion round (all agents see the same
    grouped solutions, their own reply included): ``groups`` answer groups, whether a group of
    unreadable answers followed (``unread``), and how many ``replies`` were listed in all."""

    groups: int
    unread: bool
    replies: int


def reconcile_cost(
    s: Sizes, n_agents: int, question_tokens: float, reply_tokens: float, shown: Sequence[ReconcileShown]
) -> Cost:
    """RECONCILE given what each discussion round run showed (one :class:`ReconcileShown` per
    round after round 0: ``rounds_run - 1`` of them); exact when the answers and confidences
    shown are one token each, as on the simulated backend (see the module docstring)."""
    first, debate = s.need("reconcile_first", "reconcile_debate")
    (blk,) = s.need("reconcile_block", kind=ReconcileBlock)
    n, q, c = n_agents, question_tokens, reply_tokens
    head = s.g + sys_tokens(s)
    prompt = n * (head + s.f + first.tokens(q))
    for sh in shown:
        block = sh.groups * blk.header + (blk.unread_header if sh.unread else 0) + sh.replies * (blk.member + c)
        prompt += n * (head + s.f + debate.tokens(q) + debate.views * block)
    calls = n * (len(shown) + 1)
    return Cost(prompt_tokens=prompt, completion_tokens=calls * c, calls=calls)


def reconcile_estimate(
    s: Sizes,
    n_agents: int,
    rounds: int,
    question_tokens: float,
    reply_tokens: float,
    answer_groups: int | None = None,
    rounds_run: int | None = None,
) -> Cost:
    """RECONCILE's closed-form estimate: ``rounds_run`` rounds (default all), every reply readable
    and shown, ``answer_groups`` groups in every discussion round (default min(2, N): Figure 7's
    majority and minority). With the early stop a run that keeps two groups never stops, so the
    default is the cost of a question the agents never settle."""
    run = rounds if rounds_run is None else rounds_run
    groups = min(2, n_agents) if answer_groups is None else answer_groups
    if not 1 <= run <= rounds:
        raise ValueError(f"rounds_run {run} must be in 1..{rounds}")
    if not 1 <= groups <= n_agents:
        raise ValueError(f"answer_groups {groups} must be in 1..{n_agents}")
    shown = [ReconcileShown(groups, False, n_agents)] * (run - 1)
    return reconcile_cost(s, n_agents, question_tokens, reply_tokens, shown)


def reconcile_shown_from_records(records: Sequence[Any], rounds_run: int) -> list[ReconcileShown]:
    """What each discussion round of one RECONCILE question showed, from its call records
    (``DebateLog.records``): round t lists round t-1's replies that did not fail, grouped by
    their extracted answer (None: the unreadable group)."""
    out = []
    for t in range(1, rounds_run):
        prev = [r for r in records if r.round == t - 1 and r.agent_id >= 0 and r.error is None]
        answers = [r.answer for r in prev]
        out.append(ReconcileShown(len({a for a in answers if a is not None}), None in answers, len(prev)))
    return out


def _cost(
    s,
    n: int,
    rounds: int,
    q: float,
    c: float,
    *,
    answer_groups: int | None = None,
    rounds_run: int | None = None,
    **_: object,
):
    """Estimate (see :func:`reconcile_estimate`): every reply readable and shown,
    ``answer_groups`` groups in every discussion round (default min(2, N): Figure 7's majority and
    minority), all ``rounds`` run (or ``rounds_run``)."""

    return reconcile_estimate(s, n, rounds, q, c, answer_groups=answer_groups, rounds_run=rounds_run)


def _label(cfg: Mapping[str, Any]) -> list[str]:
    vote = cfg.get("reconcile_vote", "weighted")
    return ([] if vote == "weighted" else [f"vote={vote}"]) + (["samples"] if cfg.get("reconcile_samples") else [])


RECONCILE_VOTE = Option(
    "reconcile_vote",
    str,
    "weighted",
    "final answer: weighted (the paper: each agent's last answer weighted by its recalibrated "
    "confidence) or majority (the plain vote, as CortexDebate's appendix F describes RECONCILE)",
    choices=VOTES,
)

RECONCILE_SAMPLES = Option(
    "reconcile_samples",
    str,
    None,
    "YAML/JSON file of convincing samples: model name (or '*') -> list of {question, explanation, answer}; "
    "each agent is shown the other models' samples in front of every prompt (default: none)",
    also=(dict,),
    hash_as=load_samples,
)

SPEC = ProtocolSpec(
    "reconcile",
    reconcile,
    "RECONCILE: round-table discussion showing the answers grouped with their confidences, until consensus; "
    "confidence-weighted vote (Chen, Saha & Bansal 2023)",
    "RECONCILE",
    settings=(EARLY_STOP, RECONCILE_VOTE, RECONCILE_SAMPLES),
    check=_check,
    stages=STAGES,
    cost=_cost,
    cost_kind="estimate",
    label_parts=_label,
    revote=revote,
    example="--agents 3 --rounds 3",
)

__all__ = [
    "RECONCILE_SAMPLES",
    "RECONCILE_VOTE",
    "SPEC",
    "STAGES",
    "AnswerGroup",
    "Sample",
    "SamplesError",
    "group_header",
    "group_replies",
    "load_samples",
    "member_line",
    "recalibrate",
    "reconcile",
    "revote",
    "round_vote",
    "samples_block",
    "samples_by_agent",
    "solutions_block",
    "unread_header",
]
