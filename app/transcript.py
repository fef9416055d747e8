"""A stored debate as a typed view model: who said what to whom, round by round.

:func:`debate_views` turns :class:`engine.results.Results` (:func:`engine.results.load`) into one
:class:`DebateView` per question: its header (run, protocol, options, question text, gold, final
answer), its agents (model, group, strong/weak), and one :class:`RoundView` per round holding
every call as a :class:`Turn` (whom it read, its answer graded against the gold, its reply and
tokens), the summaries, and the vote. ``debate show`` (:mod:`app.show`) renders these in the
terminal; :meth:`DebateView.to_dict` gives the same as plain JSON-safe data for an HTML page.

Rounds are numbered from 0 (round 0: the first answers), as ``calls.round`` and the graphs table
store them; this is the one numbering every view shows. Pure pandas: no rich, no Ray.

What an older folder lacks (columns written before they existed) is read as None and listed in
:attr:`DebateView.lacks`, one human line each, so a reader can say so instead of guessing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from engine.extract import answers_equal
from engine.formatting import shown_model
from engine.kinds import KINDS
from engine.protocols.base import SUMMARIZER, summary_node
from engine.results import Results, ResultsError, read_table
from engine.tasks import TASKS

if TYPE_CHECKING:
    import pandas as pd

#: The ``only`` selections of :func:`debate_views`.
SELECTIONS = ("wrong", "right", "disagree", "changed")

#: Run options shown in a debate's header, in this order (those a run has and sets).
HEADER_OPTIONS = (
    "agents",
    "rounds",
    "model",
    "models",
    "strong_agents",
    "topology",
    "density",
    "groups",
    "stage_rounds",
    "memory",
    "tie_break",
    "dataset",
    "seed",
)


def _value(x: Any) -> Any:
    """A cell as plain Python: None for null / NaN, numpy scalars and arrays as Python values."""
    if x is None:
        return None
    if hasattr(x, "tolist") and not isinstance(x, str):
        x = x.tolist()  # a numpy scalar or array
    if isinstance(x, float) and math.isnan(x):
        return None
    try:
        # function-level: importing pandas here keeps it off start-up
        import pandas as pd

        if x is pd.NA or x is pd.NaT:
            return None
    except ImportError:  # pragma: no cover
        pass
    return x


def _int(x: Any) -> int | None:
    v = _value(x)
    return None if v is None else int(v)


def _ints(x: Any) -> list[int] | None:
    v = _value(x)
    return None if v is None else [int(i) for i in v]


@dataclass
class Turn:
    """One stored call of a debate (a row of ``calls``).

    agent_id:  the agent (>= 0), or -1 for a summary call.
    node:      its graph node: the agent id, or ``-1 - group`` for a summary (:func:`summary_node`).
    round:     0-based round.
    model, group, kind, side: as stored in ``calls`` (group None when the protocol has none or
               the folder predates the column; kind None in folders that predate it).
    summary:   a summary call (agent_id -1).
    read:      the nodes it read: its ``graphs`` row when stored (summary nodes for an inter-group
               turn), else ``calls.peers``.
    weights:   one edge weight per ``read`` node (CortexDebate), None when all are 1.0.
    pruned:    nodes CortexDebate pruned from its reading this round (``graphs.pruned``; empty
               otherwise and in folders that predate the column); ``pruned_weights`` their
               weights before pruning.
    answer:    the answer the grader read: the latest ``debate rescore`` reading (the ``answers``
               table) when there is one, else ``calls.answer``; None for a summary or side call.
    correct:   ``answer`` graded against the gold with the run's grader
               (:func:`engine.extract.answers_equal`); None when there is no answer, gold or task.
    text:      the reply; None in folders that did not store it.
    prompt:    the chat messages sent ([{"role", "content"}], from the ``prompts`` table);
               None when the call was stored without them (``--no-store-prompts``, old folders).
    cached_prompt_tokens: of ``prompt_tokens``, those the engine's prefix cache served
               (``calls.cached_prompt_tokens``); None when unknown (the backend cannot say, an
               error row, a reused reply, old folders).
    """

    agent_id: int
    node: int
    round: int
    model: str | None
    group: int | None
    kind: str | None
    side: bool
    summary: bool
    read: list[int]
    weights: list[float] | None
    pruned: list[int]
    answer: str | None
    correct: bool | None
    text: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float | None
    error: str | None
    finish_reason: str | None
    prompt: list[dict[str, str]] | None = None
    pruned_weights: list[float] | None = None
    cached_prompt_tokens: int | None = None

    @property
    def meaning(self) -> str | None:
        """What its kind of call is (:data:`engine.kinds.KINDS`), None for an undeclared kind."""
        k = KINDS.get(self.kind or "")
        return k.meaning if k else None


@dataclass
class RoundView:
    """One round of a debate.

    turns:        the agents' calls, in agent order, side calls (reviews, scores) after them.
    summaries:    the summary calls, by node (group 0 first).
    vote:         the vote after this round (``questions.answer_by_round``), None if not stored.
    vote_correct: that vote graded (``questions.correct_by_round``).
    consensus:    the share of agents holding the top answer (``questions.consensus``).
    changed:      agents that spoke this round with an answer other than their previous one.
    """

    round: int
    turns: list[Turn] = field(default_factory=list)
    summaries: list[Turn] = field(default_factory=list)
    vote: str | None = None
    vote_correct: bool | None = None
    consensus: float | None = None
    changed: list[int] = field(default_factory=list)


@dataclass
class AgentInfo:
    """One agent: its model, group (None without groups) and whether it runs the strong model
    (the first, strongest, of the run's ``--models``; all False with one model)."""

    agent_id: int
    model: str | None
    group: int | None
    strong: bool


@dataclass
class DebateView:
    """One question's stored debate (see the module docstring).

    final_answer / correct / tie / errored: the question row's (after ``debate rescore``, its
    latest grading). options: the run options of :data:`HEADER_OPTIONS` the run sets. tokens:
    ``{"prompt": ..., "completion": ...}`` summed over its calls, and ``"cached"`` (over the calls
    that report a cached count) when any does. lacks: one line per thing the
    folder does not store (question text, groups, the graph, prompts, ...). simulated: the
    simulated model answered (test data; shown labelled as such).
    """

    run_id: str
    question_id: str
    protocol: str | None
    task: str | None
    question: str | None
    image: str | None
    gold: str | None
    final_answer: str | None
    correct: bool | None
    tie: bool | None
    errored: bool | None
    stopped_early: bool | None
    n_agents: int
    agents: list[AgentInfo]
    rounds: list[RoundView]
    tokens: dict[str, int]
    options: dict[str, Any]
    lacks: list[str]
    run_dir: str | None = None
    backend: str | None = None  # the backend that answered (vllm, transformers, openai, simulated)
    simulated: bool = False  # answered by the simulated model (test data, never a result)

    def final_answers(self) -> dict[int, str | None]:
        """Each agent's latest answer after the last round (silent agents keep theirs)."""
        latest: dict[int, str | None] = {a.agent_id: None for a in self.agents}
        for rv in self.rounds:
            for t in rv.turns:
                if not t.side:
                    latest[t.agent_id] = t.answer
        return latest

    def to_dict(self) -> dict[str, Any]:
        """The view as plain JSON-safe data (dicts, lists, str, int, float, bool, None)."""
        data = asdict(self)
        return json.loads(json.dumps(data, default=str, allow_nan=False))


# ----------------------------------------------------------------------------- selection predicates
def is_wrong(view: DebateView) -> bool:
    """The final answer is graded incorrect (an ungraded question is neither wrong nor right)."""
    return view.correct is False


def is_right(view: DebateView) -> bool:
    """The final answer is graded correct."""
    return view.correct is True


def disagrees(view: DebateView) -> bool:
    """The agents' answers after the last round are not all equal (each agent's latest answer:
    agents a protocol left silent keep theirs; no answer counts as an answer of its own)."""
    return len(set(view.final_answers().values())) > 1


def changed(view: DebateView) -> bool:
    """Some agent changed its answer between rounds."""
    return any(rv.changed for rv in view.rounds)


PREDICATES: dict[str, Callable[[DebateView], bool]] = {
    "wrong": is_wrong,
    "right": is_right,
    "disagree": disagrees,
    "changed": changed,
}


# ----------------------------------------------------------------------------- building views
def _few(ids: list[str], n: int = 5) -> str:
    shown = ", ".join(ids[:n])
    return shown + (f" (+{len(ids) - n} more)" if len(ids) > n else "")


def _pick(ids: list[str], wanted: str, what: str) -> str:
    """``wanted`` itself, or the one id it is a prefix of; :class:`ResultsError` otherwise."""
    if wanted in ids:
        return wanted
    hits = [i for i in ids if i.startswith(wanted)]
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise ResultsError(f"{what} {wanted!r} is ambiguous: {_few(hits)}")
    raise ResultsError(f"no {what} {wanted!r} here; {what}s: {_few(ids) or 'none'}")


def strong_model(models_option: Any) -> str | None:
    """The strongest model of a run's ``--models`` option (listed strongest first: ``"big*1,
    small*5"``, or a JSON list), None without one."""
    v = _value(models_option)
    if v is None:
        return None
    if isinstance(v, str) and v.strip().startswith("["):
        try:
            v = json.loads(v)
        except json.JSONDecodeError:
            return None
    first = v[0] if isinstance(v, list) and v else (v.split(",")[0] if isinstance(v, str) else None)
    if not isinstance(first, str):
        return None
    return first.split("*")[0].strip() or None


def _grade(answer: str | None, gold: str | None, task: str | None) -> bool | None:
    if answer is None or gold is None or task not in TASKS:
        return None
    return answers_equal(answer, gold, str(task))


def _graph_rows(graphs: pd.DataFrame) -> dict[tuple[int, int], list[dict[str, Any]]]:
    """The graphs rows of one question by (round, dst), in stored order."""
    out: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for g in graphs.to_dict("records"):
        rnd, dst = _int(g.get("round")), _int(g.get("dst"))
        if rnd is None or dst is None:
            continue
        out.setdefault((rnd, dst), []).append(g)
    return out


AnswerKey = tuple[str, str, Any, int, int]  # run_id, question_id, attempt, round, agent_id


def rescored_answers(results: Results) -> dict[AnswerKey, str | None]:
    """The latest ``debate rescore`` reading of each re-read agent call of the runs loaded (the
    ``answers`` table of each run's folder, which :func:`engine.results.load` does not return), read
    as ``load`` read the folders (``skip_bad_parts``: an unreadable answers part is left out, a
    warning naming it logged)."""
    out: dict[AnswerKey, str | None] = {}
    dirs = results.runs["run_dir"].dropna().unique() if "run_dir" in results.runs else []
    for run_dir in dirs:
        for a in read_table(str(run_dir), "answers", skip_bad_parts=results.skip_bad_parts).to_pylist():
            out[(a["run_id"], a["question_id"], a["attempt"], a["round"], a["agent_id"])] = a["answer"]
    return out


def _turns(
    calls: pd.DataFrame,
    graphs: pd.DataFrame,
    gold: str | None,
    task: str | None,
    rescored: dict[AnswerKey, str | None] | None = None,
    texts: Messages | None = None,
) -> tuple[list[Turn], bool]:
    """Every call of one question as a :class:`Turn`, in stored order; also whether any round
    had to be inferred (folders whose calls lack ``round``: the k-th call of an agent is round k)."""
    by_dst = _graph_rows(graphs)
    rows = calls.to_dict("records")
    seen: dict[int, int] = {}
    inferred = False
    keyed: list[tuple[int, int, dict[str, Any]]] = []
    for row in rows:
        agent = _int(row.get("agent_id"))
        agent = SUMMARIZER if agent is None else agent
        rnd = _int(row.get("round"))
        if rnd is None:
            inferred = True
            rnd = seen.get(agent, 0)
        seen[agent] = rnd + 1
        group = _int(row.get("group"))
        node = summary_node(group or 0) if agent == SUMMARIZER else agent
        keyed.append((rnd, node, row))
    # match each reading call with its graphs row: the k-th reading call of a node in a round
    # reads the k-th row of that (round, node)
    used: dict[tuple[int, int], int] = {}
    turns = []
    for rnd, node, row in keyed:
        agent = _int(row.get("agent_id"))
        agent = SUMMARIZER if agent is None else agent
        peers = _ints(row.get("peers")) or []
        rows_here = by_dst.get((rnd, node), [])
        read, weights, pruned, pruned_w = peers, None, [], None
        if rows_here and (peers or len(rows_here) == 1):
            k = used.get((rnd, node), 0)
            if k < len(rows_here):
                g = rows_here[k]
                used[(rnd, node)] = k + 1
                read = _ints(g.get("srcs")) or []
                w = _value(g.get("weights"))
                weights = None if w is None else [float(x) for x in w]
                cut = _value(g.get("pruned"))
                if cut is not None and any(cut):  # Cortex: the pruned edges follow the kept ones
                    cut = [bool(x) for x in cut]
                    pruned = [n for n, x in zip(read, cut) if x]
                    pruned_w = None if weights is None else [v for v, x in zip(weights, cut) if x]
                    read = [n for n, x in zip(read, cut) if not x]
                    weights = None if weights is None else [v for v, x in zip(weights, cut) if not x]
        summary = agent == SUMMARIZER
        side = bool(_value(row.get("side")) or False)
        kind = _value(row.get("kind"))
        answer = None if summary or side else _value(row.get("answer"))
        key = (row.get("run_id"), row.get("question_id"), _value(row.get("attempt")), rnd, agent)
        if answer is not None and rescored and key in rescored:
            answer = rescored[key]
        turns.append(
            Turn(
                agent_id=agent,
                node=node,
                round=rnd,
                model=_value(row.get("model")),
                group=_int(row.get("group")),
                kind=kind,
                side=side,
                summary=summary,
                read=read,
                weights=weights,
                pruned=pruned,
                pruned_weights=pruned_w,
                answer=answer,
                correct=_grade(answer, gold, task),
                text=_value(row.get("text")),
                prompt_tokens=_int(row.get("prompt_tokens")),
                completion_tokens=_int(row.get("completion_tokens")),
                latency_s=_value(row.get("latency_s")),
                error=_value(row.get("error")),
                finish_reason=_value(row.get("finish_reason")),
                prompt=_prompt(row, texts),
                cached_prompt_tokens=_int(row.get("cached_prompt_tokens")),
            )
        )
    return turns, inferred


Messages = dict[tuple[str, str], dict[str, str]]  # (run_id, message key) -> {"role", "content"}


def prompt_texts(results: Results) -> Messages:
    """Every stored prompt message of the runs loaded, by (run_id, message key)."""
    p = results.prompts
    if p.empty:
        return {}
    return {
        (r, k): {"role": role, "content": content}
        for r, k, role, content in zip(p["run_id"], p["message"], p["role"], p["content"])
    }


def _prompt(row: dict[str, Any], texts: Messages | None) -> list[dict[str, str]] | None:
    """A call's messages from its ``prompt`` keys; None without keys or when one is missing."""
    keys = _value(row.get("prompt")) if "prompt" in row else None
    if keys is None or not texts:
        return None
    run_id = str(row.get("run_id"))
    found = [texts.get((run_id, str(k))) for k in keys]
    return None if any(m is None for m in found) else [dict(m) for m in found if m is not None]


def _rounds(turns: list[Turn], q: dict[str, Any]) -> list[RoundView]:
    """The rounds of one question: its calls grouped and ordered, its per-round vote, and which
    agents changed their answer."""
    votes = _value(q.get("answer_by_round")) or []
    graded = _value(q.get("correct_by_round")) or []
    cons = _value(q.get("consensus")) or []
    n = max([len(votes), _int(q.get("rounds_run")) or 0, *(t.round + 1 for t in turns)], default=0)
    views = [RoundView(round=r) for r in range(n)]
    for t in turns:
        (views[t.round].summaries if t.summary else views[t.round].turns).append(t)
    previous: dict[int, str | None] = {}
    for rv in views:
        changed: set[int] = set()
        r = rv.round
        rv.turns.sort(key=lambda t: (t.side, t.agent_id))  # stable: a reader's calls keep their order
        rv.summaries.sort(key=lambda t: -t.node)
        rv.vote = votes[r] if r < len(votes) else None
        rv.vote_correct = bool(graded[r]) if r < len(graded) and graded[r] is not None else None
        rv.consensus = float(cons[r]) if r < len(cons) and cons[r] is not None else None
        for t in rv.turns:
            if t.side:
                continue
            if t.agent_id in previous and previous[t.agent_id] != t.answer and t.agent_id not in changed:
                changed.add(t.agent_id)
                rv.changed.append(t.agent_id)
            previous[t.agent_id] = t.answer
    return views


def _lacks(
    q: dict[str, Any], calls: pd.DataFrame, graphs: pd.DataFrame, turns: list[Turn], inferred: bool
) -> list[str]:
    """What the folder does not store for this debate, one line each."""
    lacks = []
    if _value(q.get("question")) is None:
        lacks.append("question text not stored (folder written before it existed)")
    if _value(q.get("gold")) is None:
        lacks.append("gold answer not stored")
    if inferred:
        lacks.append("call rounds not stored: each agent's k-th call is shown as round k")
    if turns and all(t.kind is None for t in turns):
        lacks.append("call kinds not stored")
    if turns and all(t.text is None for t in turns):
        lacks.append("replies not stored")
    if turns and "group" in calls and calls["group"].isna().all() and any(t.summary for t in turns):
        lacks.append("groups not stored: summaries are shown as one node (-1)")
    reading = any(t.read for t in turns) or len(graphs) > 0
    if reading and len(graphs) == 0:
        lacks.append("graph not stored: whom each call read is taken from calls.peers")
    elif len(graphs) and "dst_group" in graphs and graphs["dst_group"].isna().all() and any(t.summary for t in turns):
        lacks.append("summary groups not stored in the graph (folder written before graphs.dst_group)")
    if turns and all(t.prompt is None for t in turns):
        lacks.append("prompts not stored (run with --no-store-prompts, or folder written before they were stored)")
    return lacks


GROUP_PROTOCOLS = ("group", "s2mad")  # the protocols that read --stage-rounds


def _options(run: dict[str, Any]) -> dict[str, Any]:
    """The run's options of :data:`HEADER_OPTIONS` that it sets (``model`` only without
    ``models``, ``stage_rounds`` only for GroupDebate and S2-MAD)."""
    out = {}
    for name in HEADER_OPTIONS:
        if name == "stage_rounds" and run.get("protocol") not in GROUP_PROTOCOLS:
            continue
        if name == "model" and _value(run.get("models")) is not None:
            continue
        v = _value(run.get(name))
        if v is not None and v != "none":
            out[name] = v
    return out


def debate_view(results: Results, run_id: str, question_id: str) -> DebateView:
    """The :class:`DebateView` of one question of one run (both ids exact)."""
    qs = results.questions
    sel = qs[(qs["run_id"] == run_id) & (qs["question_id"] == question_id)]
    if sel.empty:
        raise ResultsError(f"no question {question_id!r} in run {run_id!r}")
    return _view(results, sel.iloc[0].to_dict(), rescored=rescored_answers(results), texts=prompt_texts(results))


def _view(
    results: Results,
    q: dict[str, Any],
    calls: pd.DataFrame | None = None,
    graphs: pd.DataFrame | None = None,
    rescored: dict[AnswerKey, str | None] | None = None,
    texts: Messages | None = None,
) -> DebateView:
    """One question row's view; ``calls`` and ``graphs`` its rows when the caller grouped them."""
    run_id, qid = str(q["run_id"]), str(q["question_id"])
    if calls is None:
        c = results.calls
        calls = c[(c["run_id"] == run_id) & (c["question_id"] == qid)]
    if graphs is None:
        g = results.graphs
        graphs = g[(g["run_id"] == run_id) & (g["question_id"] == qid)]
    runs = results.runs[results.runs["run_id"] == run_id]
    run = runs.iloc[0].to_dict() if len(runs) else {}
    gold, task = _value(q.get("gold")), _value(q.get("task"))
    turns, inferred = _turns(calls, graphs, gold, task, rescored, texts)
    rounds = _rounds(turns, q)
    n_agents = _int(q.get("n_agents")) or _int(run.get("agents")) or 0
    n_agents = max([n_agents, *(t.agent_id + 1 for t in turns)])
    strong = strong_model(run.get("models"))
    several = len({t.model for t in turns if not t.summary and t.model}) > 1
    model_of: dict[int, str] = {}  # each agent's first stored model and group, in one pass
    group_of: dict[int, int] = {}
    for t in turns:
        if t.model:
            model_of.setdefault(t.agent_id, t.model)
        if t.group is not None:
            group_of.setdefault(t.agent_id, t.group)
    agents = [
        AgentInfo(a, model_of.get(a), group_of.get(a), bool(strong and several and model_of.get(a) == strong))
        for a in range(n_agents)
    ]
    simulated = bool(_value(q.get("simulated")) or _value(run.get("simulated")))
    options = _options(run)
    if simulated:
        _label_simulated(turns, agents, options, several)
    ptok = sum(t.prompt_tokens or 0 for t in turns)
    ctok = sum(t.completion_tokens or 0 for t in turns)
    cached = [t.cached_prompt_tokens for t in turns if t.cached_prompt_tokens is not None]
    return DebateView(
        run_id=run_id,
        question_id=qid,
        protocol=_value(q.get("protocol")) or _value(run.get("protocol")),
        task=task,
        question=_value(q.get("question")),
        image=_value(q.get("image")),
        gold=gold,
        final_answer=_value(q.get("final_answer")),
        correct=_value(q.get("correct")),
        tie=_value(q.get("tie")),
        errored=_value(q.get("errored")),
        stopped_early=_value(q.get("stopped_early")),
        n_agents=n_agents,
        agents=agents,
        rounds=rounds,
        tokens={"prompt": ptok, "completion": ctok, **({"cached": sum(cached)} if cached else {})},
        options=options,
        lacks=_lacks(q, calls, graphs, turns, inferred),
        run_dir=_value(q.get("run_dir")),
        backend=_value(q.get("backend")) or _value(run.get("backend")),
        simulated=simulated,
    )


def _label_simulated(turns: list[Turn], agents: list[AgentInfo], options: dict[str, Any], several: bool) -> None:
    """Name no model in a simulated debate: its calls, agents and ``model`` option show
    :func:`engine.formatting.shown_model` (the stored name is the configured one, never a model
    that answered)."""
    for turn in turns:
        turn.model = shown_model(turn.model, True, several)
    for agent in agents:
        agent.model = shown_model(agent.model, True, several)
    if "model" in options:
        options["model"] = shown_model(str(options["model"]), True, several)


def select_questions(results: Results, run: str | None = None, question: str | None = None) -> pd.DataFrame:
    """The question rows of ``run`` (an id or a unique prefix) and ``question`` (likewise), in
    stored order; :class:`ResultsError` naming an unknown id and a few valid ones."""
    qs = results.questions
    if run is not None:
        ids = list(dict.fromkeys([*results.runs["run_id"].astype(str), *qs["run_id"].astype(str)]))
        qs = qs[qs["run_id"] == _pick(ids, run, "run")]
    if question is not None:
        ids = list(dict.fromkeys(qs["question_id"].astype(str)))
        qs = qs[qs["question_id"] == _pick(ids, question, "question")]
    return qs


def debate_views(
    results: Results, run: str | None = None, question: str | None = None, only: str | None = None
) -> list[DebateView]:
    """The :class:`DebateView` of every question of ``results`` (or of ``run`` / ``question``:
    an id or a unique prefix), in stored order, kept when ``only`` holds: ``"wrong"``,
    ``"right"``, ``"disagree"`` or ``"changed"`` (:data:`PREDICATES`); None keeps all."""
    if only is not None and only not in PREDICATES:
        raise ResultsError(f"unknown selection {only!r}: one of {', '.join(SELECTIONS)}")
    qs = select_questions(results, run, question)
    calls = {k: v for k, v in results.calls.groupby(["run_id", "question_id"], sort=False)}
    graphs = {k: v for k, v in results.graphs.groupby(["run_id", "question_id"], sort=False)}
    empty_c, empty_g = results.calls.iloc[0:0], results.graphs.iloc[0:0]
    rescored = rescored_answers(results)
    texts = prompt_texts(results)
    views = []
    for q in qs.to_dict("records"):
        key = (q["run_id"], q["question_id"])
        v = _view(results, q, calls.get(key, empty_c), graphs.get(key, empty_g), rescored, texts)
        if only is None or PREDICATES[only](v):
            views.append(v)
    return views
