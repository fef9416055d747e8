"""``debate show OUT``: stored debates in the terminal, round by round (rich).

Reads every run under ``OUT`` through :func:`engine.results.load` and renders the
:class:`~app.transcript.DebateView` of the selected questions (:func:`app.transcript.debate_views`):
a header (run, protocol, options, the question text, gold), then per round a table of the
agents' calls (model, group, whom each read, its answer ✓/✗, the reply shortened to two lines
unless ``full``, tokens: prompt/completion, and a ``cached`` column of the prompt tokens the
engine's prefix cache served when the debate's calls report them, ``-`` for a call that does
not), the side calls, the summaries, the vote; at the end the final answer.

With several questions selected it first lists them, one line each, then shows the first
``limit`` debates. Graph nodes: agents are ``0, 1, ...``; ``S<g>`` is the summary of group g
(node ``-1 - g``). The width is the terminal's; off a terminal ``$COLUMNS``, else 100.

Every string from the folder (ids, question, gold, replies, answers, model names, options, notes)
is printed inert (:func:`engine.safe_text.inert`: control characters as visible escapes) and as
``rich.text.Text``, never as markup, so a reply cannot drive the terminal and ``[/]`` prints as is.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from app.transcript import DebateView, RoundView, Turn, debate_views
from engine.results import load
from engine.safe_text import inert

DEFAULT_WIDTH = 100  # off a terminal, without $COLUMNS
REPLY_LINES = 2  # a reply's lines in the round table, unless --full
# fields of the views shown on one line (a newline in them is shown as \n), and those not shown
_ONE_LINE = {"run_id", "question_id", "protocol", "task", "model", "kind", "answer", "gold", "final_answer", "vote"}
_NOT_SHOWN = {"prompt"}  # the messages each call was sent: large, and only the HTML page shows them


def make_console(file: Any = None) -> Console:
    """A console of the terminal's width; off a terminal ``$COLUMNS``, else :data:`DEFAULT_WIDTH`."""
    probe = Console(file=file)
    width = None
    if not probe.is_terminal:
        try:
            width = int(os.environ.get("COLUMNS", "")) or DEFAULT_WIDTH
        except ValueError:
            width = DEFAULT_WIDTH
    return Console(file=file, width=width, highlight=False)


def inert_view(value: Any, one_line: bool = False) -> Any:
    """A copy of ``value`` (a DebateView, or its rounds, turns, agents, options) with every string
    made :func:`~engine.safe_text.inert`; the fields of :data:`_ONE_LINE` on one line."""
    if isinstance(value, str):
        return inert(value, lines=not one_line)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(
            value,
            **{
                f.name: inert_view(getattr(value, f.name), f.name in _ONE_LINE)
                for f in dataclasses.fields(value)
                if f.name not in _NOT_SHOWN
            },
        )
    if isinstance(value, list):
        return [inert_view(v, one_line) for v in value]
    if isinstance(value, dict):
        return {inert_view(k, True): inert_view(v, one_line) for k, v in value.items()}
    return value


def mark(correct: bool | None) -> Text:
    """✓ (green) for correct, ✗ (red) for wrong, nothing when ungraded."""
    if correct is None:
        return Text("")
    return Text("✓", style="green") if correct else Text("✗", style="red")


def node_name(node: int) -> str:
    """A graph node as shown: an agent's id, or ``S<g>`` for the summary of group g."""
    return str(node) if node >= 0 else f"S{-1 - node}"


def _reads(t: Turn) -> str:
    if not t.read:
        return "-"
    names = [node_name(n) for n in t.read]
    if t.weights is not None:
        names = [f"{n}:{w:.2f}" for n, w in zip(names, t.weights)]
    text = ",".join(names)
    if t.pruned:
        text += " pruned " + ",".join(node_name(n) for n in t.pruned)
    return text


def _reply(t: Turn, full: bool, chars: int) -> Text:
    if t.error:
        return Text(f"error: {t.error}", style="red")
    if t.text is None:
        return Text("(not stored)", style="dim")
    if full:
        return Text(t.text)
    flat = re.sub(r"\s+", " ", t.text).strip()
    return Text(flat if len(flat) <= chars else flat[: max(chars - 1, 1)] + "…")


def _tokens(t: Turn) -> str:
    p = "?" if t.prompt_tokens is None else str(t.prompt_tokens)
    c = "?" if t.completion_tokens is None else str(t.completion_tokens)
    return f"{p}/{c}"


def _cached(t: Turn) -> str:
    return "-" if t.cached_prompt_tokens is None else str(t.cached_prompt_tokens)


def has_cached(view: DebateView) -> bool:
    """Whether any call of the debate reports its cached prompt tokens (then the tables show them)."""
    return "cached" in view.tokens


def _answer(t: Turn) -> Text:
    if t.side:
        return Text("")
    out = Text("-" if t.answer is None else t.answer)
    if t.correct is not None:
        out.append(" ").append_text(mark(t.correct))
    return out


def _reply_chars(width: int, has_group: bool, cached: bool = False) -> int:
    """Characters of a shortened reply: about :data:`REPLY_LINES` lines of the reply column."""
    # agent, model, group, read, answer, tokens, cached tokens and borders
    fixed = 36 + (6 if has_group else 0) + (8 if cached else 0)
    return max(30, (width - fixed) * REPLY_LINES)


def several_models(view: DebateView) -> bool:
    """Whether the debate's calls use more than one model (then the round tables name them)."""
    return len({t.model for rv in view.rounds for t in rv.turns if t.model}) > 1


def round_table(rv: RoundView, view: DebateView, full: bool, width: int) -> Table:
    """One round's agent calls (side calls after them, marked) as a table."""
    has_group = any(a.group is not None for a in view.agents)
    strong = {a.agent_id for a in view.agents if a.strong}
    models = several_models(view)
    table = Table(show_edge=False, pad_edge=False, expand=True, header_style="bold")
    table.add_column("agent", no_wrap=True)
    if models:
        table.add_column("model", no_wrap=True, overflow="ellipsis", max_width=20)
    if has_group:
        table.add_column("grp", no_wrap=True)
    table.add_column("read", overflow="fold", max_width=16)
    table.add_column("answer", overflow="fold", max_width=14)
    table.add_column("reply", ratio=1, overflow="fold")
    table.add_column("tok p/c", no_wrap=True, justify="right")
    cached = has_cached(view)
    if cached:
        table.add_column("cached", no_wrap=True, justify="right")
    chars = _reply_chars(width, has_group, cached)
    for t in rv.turns:
        who = Text(str(t.agent_id))
        if t.side:
            who.append(f" {t.kind or 'side'}", style="dim")
        elif t.agent_id in rv.changed:
            who.append(" *", style="yellow")
        cells: list[RenderableType] = [who]
        if models:
            name = (t.model or "?").rstrip("/").rsplit("/", 1)[-1]
            cells.append(Text(name) + (Text(" ★", style="bold yellow") if t.agent_id in strong else Text("")))
        if has_group:
            cells.append("" if t.group is None else str(t.group))
        cells += [_reads(t), _answer(t), _reply(t, full, chars), _tokens(t)]
        if cached:
            cells.append(_cached(t))
        table.add_row(*cells, style="dim" if t.side else None)
    return table


def summaries_table(rv: RoundView, full: bool, width: int, cached: bool = False) -> Table:
    """One round's summary calls: which group's, whom it read, its reply, its tokens (and, with
    ``cached``, its cached prompt tokens)."""
    table = Table(show_edge=False, pad_edge=False, expand=True, header_style="bold")
    table.add_column("summary", no_wrap=True)
    table.add_column("read", overflow="fold", max_width=16)
    table.add_column("reply", ratio=1, overflow="fold")
    table.add_column("tok p/c", no_wrap=True, justify="right")
    if cached:
        table.add_column("cached", no_wrap=True, justify="right")
    chars = _reply_chars(width, False, cached)
    for t in rv.summaries:
        label = node_name(t.node) + ("" if t.group is None else f" (group {t.group})")
        table.add_row(label, _reads(t), _reply(t, full, chars), _tokens(t), *([_cached(t)] if cached else []))
    return table


def _graded(label: str, answer: str | None, correct: bool | None) -> Text:
    """``label: answer ✓/✗`` (``-`` for no answer; no mark when ungraded)."""
    line = Text(label, style="bold")
    line.append("-" if answer is None else answer)
    if correct is not None:
        line.append(" ").append_text(mark(correct))
    return line


def _vote_line(rv: RoundView) -> Text:
    line = _graded("vote: ", rv.vote, rv.vote_correct)
    if rv.consensus is not None:
        line.append(f"   consensus {rv.consensus:.2f}")
    if rv.changed:
        line.append(f"   changed (*): {', '.join(map(str, rv.changed))}", style="yellow")
    return line


def header(view: DebateView) -> list[RenderableType]:
    """The debate's title, options, question text, gold and what the folder lacks."""
    title = f"run {view.run_id} · question {view.question_id} · {view.protocol or '?'}"
    parts: list[RenderableType] = [Rule(Text(title, style="bold"))]
    if view.simulated:
        parts.append(Text("SIMULATED model: test data, not a model's answers", style="bold red"))
    opts = "  ".join(f"{k}={v}" for k, v in view.options.items())
    if opts:
        parts.append(Text(opts, style="cyan"))
    for lack in view.lacks:
        parts.append(Text(lack, style="dim"))
    if view.question is not None:
        parts.append(Text(view.question))
    if view.image is not None:
        parts.append(Text(f"image: {view.image}", style="dim"))
    parts.append(Text("gold: ", style="bold") + Text("-" if view.gold is None else view.gold))
    if several_models(view):
        roster = ", ".join(f"{a.agent_id} {a.model or '?'}" + (" ★ strong" if a.strong else "") for a in view.agents)
        parts.append(Text(f"agents: {roster}", style="dim"))
    else:
        model = next((a.model for a in view.agents if a.model), None)
        if model:
            parts.append(Text(f"model: {model}", style="dim"))
    return parts


def stopped_text(view: DebateView) -> str:
    """The early stop said with the rounds: "stopped early after 2 of 3 rounds" (round 0, the
    first answers, counts, as ``--rounds`` counts it); without a stored ``--rounds`` larger than
    the rounds run, "stopped early after 2 rounds"."""
    ran = len(view.rounds)
    asked = view.options.get("rounds")
    of = f" of {asked}" if isinstance(asked, int) and not isinstance(asked, bool) and asked > ran else ""
    return f"stopped early after {ran}{of} round{'s' if ran != 1 or of else ''}"


def footer(view: DebateView) -> Text:
    """The final answer, graded, with its tie / errored / early-stop flags and the tokens (the
    cached prompt tokens too, over the calls that report them)."""
    line = _graded("final answer: ", view.final_answer, view.correct)
    line.append(f"   gold {view.gold if view.gold is not None else '-'}")
    if view.tie:
        line.append("   tie (broken by --tie-break)", style="yellow")
    if view.errored:
        line.append("   errored (a call failed: counted wrong)", style="red")
    if view.stopped_early:
        line.append(f"   {stopped_text(view)}", style="dim")
    line.append(f"   tokens {view.tokens['prompt']}/{view.tokens['completion']}", style="dim")
    if has_cached(view):
        line.append(f" ({view.tokens['cached']} prompt tokens cached)", style="dim")
    return line


def render(view: DebateView, full: bool = False, width: int = DEFAULT_WIDTH) -> Group:
    """One debate: :func:`header`, each round (agents, summaries, vote), :func:`footer`; every
    string of ``view`` shown inert (:func:`inert_view`)."""
    view = inert_view(view)
    parts = header(view)
    for rv in view.rounds:
        parts.append(Text(f"\nround {rv.round}", style="bold magenta"))
        if rv.turns:
            parts.append(round_table(rv, view, full, width))
        if rv.summaries:
            parts.append(summaries_table(rv, full, width, has_cached(view)))
        parts.append(_vote_line(rv))
    parts.append(Text(""))
    parts.append(footer(view))
    return Group(*parts)


def listing(views: list[DebateView]) -> Table:
    """One line per question: run, question, final answer ✓/✗, gold, agreement, the question's start."""
    table = Table(show_edge=False, pad_edge=False, expand=True, header_style="bold")
    table.add_column("run", no_wrap=True)
    table.add_column("question", no_wrap=True)
    table.add_column("final", overflow="fold", max_width=14)
    table.add_column("gold", overflow="fold", max_width=14)
    table.add_column("agents", no_wrap=True)
    table.add_column("text", ratio=1, no_wrap=True, overflow="ellipsis")
    for v in views:
        answers = list(v.final_answers().values())
        given = [a for a in answers if a is not None]
        agree = f"{max(given.count(a) for a in given)}/{len(answers)} agree" if given else "-"
        final = Text("-" if v.final_answer is None else inert(v.final_answer, lines=False))
        if v.correct is not None:
            final.append(" ").append_text(mark(v.correct))
        run_id, question_id, gold = (Text(inert(x, lines=False)) for x in (v.run_id, v.question_id, v.gold or "-"))
        text = Text(inert(" ".join((v.question or "").split())))
        table.add_row(run_id, question_id, final, gold, agree, text)
    return table


def show(
    path: str,
    run: str | None = None,
    question: str | None = None,
    only: str | None = None,
    full: bool = False,
    limit: int = 1,
    console: Console | None = None,
    skip_bad_parts: bool = False,
) -> int:
    """Print the selected debates of the results under ``path``; returns how many matched.
    Raises :class:`engine.results.ResultsError` for a bad folder, run or question id, or an
    unreadable part file (``skip_bad_parts``: left out, a note naming it)."""
    console = console or make_console()
    results = load(path, skip_bad_parts=skip_bad_parts)
    for note in results.notes:  # what a folder lacks is said per debate; duplicates here
        if " lacks " not in note:
            console.print(Text(f"note: {inert(note)}", style="dim"))
    views = debate_views(results, run=run, question=question, only=only)
    what = f" ({only})" if only else ""
    if not views:
        console.print(Text(inert(f"no questions{what} under {path}")))
        return 0
    if len(views) > 1:
        console.print(Text(f"{len(views)} questions{what}", style="bold"))
        console.print(listing(views))
        if limit < len(views):
            console.print(
                Text(f"showing {min(limit, len(views))} of {len(views)} (--limit N, or --question ID)", style="dim")
            )
    for view in views[: max(limit, 0)]:
        console.print(render(view, full, console.width))
    return len(views)
