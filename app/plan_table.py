"""``debate sweep --list``'s table: each cell's predicted calls and tokens, and the totals.

The predictions are :class:`engine.plan.Planner`'s (its module docstring says what the numbers
are and how they are marked); this module lays them out, with the cells' status and results.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich import box
from rich.markup import escape
from rich.table import Table

from app.cells import Cell
from engine.plan import MARKS, CellPlan, Planner, weakest
from engine.safe_text import inert


def plan_cells(cells: list[Cell]) -> dict[int, CellPlan]:
    """A prediction per valid cell, by cell index."""
    planner = Planner()
    return {c.index: planner.plan(c.config) for c in cells if c.valid}


def _num(x: float, kind: str = "exact") -> str:
    """``1,234`` (an integer), ``2.5`` else, after the kind's mark."""
    text = f"{x:,.0f}" if abs(x - round(x)) < 1e-9 or abs(x) >= 100 else f"{x:,.1f}"
    return MARKS[kind] + text


def shared_size(plans: dict[int, CellPlan]) -> str | None:
    """``30 questions, Q 18.0, C 60`` when every cell with a prediction has those same numbers
    (then the header says it once instead of every row), else None."""
    sizes = {_size(p) for p in plans.values() if p.n_questions is not None}
    return sizes.pop() if len(sizes) == 1 else None


def _size(p: CellPlan) -> str:
    """A cell's questions and Q / C as the table shows them."""
    text = f"{p.n_questions} questions"
    if p.question_tokens is not None:
        text += f", Q {p.question_tokens:.1f}, C {p.reply_tokens}"
    return text


def header(cells: list[Cell], plans: dict[int, CellPlan] | None = None) -> list[str]:
    """The lines above the table: units, the assumptions of the cells' backends and, when every
    cell has the same, their questions and Q / C."""
    simulated = {c.config.simulated for c in cells if c.valid}
    lines = [
        "predicted calls and tokens (engine/cost_model.py); tokens = prompt + completion, counted as whitespace "
        "words of the prompt templates and questions (+4 per message, +3 per prompt), as --backend simulated "
        "counts them; Q = mean question tokens, C = tokens per reply",
        "prompt = the cell's prompt tokens; computed = those left to compute after a perfect prefix cache "
        "(engine/prefix.py; a vLLM run measures prompt - calls.cached_prompt_tokens)",
    ]
    if True in simulated:
        lines.append("simulated cells: C = --sim-reply-tokens (cut to --max-tokens); exact unless marked")
    if False in simulated:
        lines.append(
            "other backends: C = --max-tokens (every reply as long as allowed: an upper bound on replies); "
            "a real tokenizer counts words differently (usually more tokens), so their tokens are marked ~"
        )
    lines.append("marks: ≤ upper bound, ~ estimate, — no prediction (the note says why)")
    shared = shared_size(plans or {})
    if shared:
        lines.append(f"every cell: {shared}")
    return lines


def plan_table(cells: list[Cell], plans: dict[int, CellPlan], labels: bool = True) -> Any:
    """A rich Table: one row per cell (its index, status, params, then a line with its questions
    and Q / C unless :func:`shared_size` says them once, and its result or note; calls and tokens
    per question and in all), then the totals of the cells with a prediction and of those still
    to run. The numbers are never cut. ``labels=False`` (a terminal too narrow for the cell
    column): no cell column, the totals named "all" and "to run" in the status column, and
    :func:`cell_lines` says what each index and total is."""
    table = Table(title="sweep plan", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)
    if labels:
        table.add_column("cell", ratio=1)
    for name in ("calls/q", "tokens/q", "calls", "tokens", "prompt", "computed"):
        table.add_column(name, justify="right", no_wrap=True)
    shared = shared_size(plans)
    for c in cells:
        cell = [_label(c, plans.get(c.index), shared)] if labels else []
        table.add_row(str(c.index), c.status, *cell, *_numbers(plans.get(c.index)))
    for name, short, counted, numbers in _totals(cells, plans):
        first = ["", f"[bold]{name}[/]: {counted}"] if labels else [short]
        table.add_row("", *first, *numbers, end_section=name == "all cells")
    return table


def cell_lines(cells: list[Cell], plans: dict[int, CellPlan]) -> list[str]:
    """What each row of a table without labels is: ``#3  protocol=mad agents=7 ...`` (with its
    questions and result or note), then each total's (``all: 20 cells, 600 questions``); plain text."""
    shared = shared_size(plans)
    width = len(str(max((c.index for c in cells), default=0)))
    lines = [
        f"#{c.index:<{width}}  " + _label(c, plans.get(c.index), shared, markup=False).replace("\n", "; ")
        for c in cells
    ]
    return lines + [f"{short}: {label}" for _, short, label, _ in _totals(cells, plans)]


def _label(c: Cell, p: CellPlan | None, shared: str | None, markup: bool = True) -> str:
    """A cell's params, then lines with its questions and Q / C (unless shared) and its result or note."""
    quote = escape if markup else (lambda text: text)
    label = quote(inert(c.label, lines=False)) + (f" (x{c.n_points} grid points)" if c.n_points > 1 else "")
    if p is not None and p.n_questions is not None and shared is None:
        label += f"\n[dim]{_size(p)}[/]" if markup else f"\n{_size(p)}"
    note = _result(c, p)
    if note:
        label += "\n" + quote(inert(note))
    return label


def _numbers(p: CellPlan | None) -> list[str]:
    """A cell's six predicted numbers as the table shows them (— without a prediction)."""
    if p is None or p.per_question is None:
        return ["—"] * 6
    return [
        _num(p.per_question.calls, p.calls_kind),
        _num(p.per_question.total, p.tokens_kind),
        _num(p.calls or 0, p.calls_kind),
        _num(p.tokens or 0, p.tokens_kind),
        _num(p.prompt or 0, p.tokens_kind),
        "—" if p.computed is None else _num(p.computed, p.computed_kind),
    ]


def _totals(cells: list[Cell], plans: dict[int, CellPlan]) -> list[tuple[str, str, str, list[str]]]:
    """The total lines: (name, short name, what they count, their six numbers)."""
    valid = [c for c in cells if c.valid]
    out = []
    for name, short, chosen, count in (
        ("all cells", "all", valid, _all),
        ("still to run", "to run", [c for c in valid if c.status != "finished"], _left),
    ):
        planned = [(c, p) for c in chosen if (p := plans[c.index]).per_question is not None]
        if not planned or (name == "still to run" and len(chosen) == len(valid)):
            continue  # nothing planned, or the same cells as the line above
        calls = sum(count(c, p) * p.per_question.calls for c, p in planned if p.per_question)
        tokens = sum(count(c, p) * p.per_question.total for c, p in planned if p.per_question)
        prompt = sum(count(c, p) * p.per_question.prompt_tokens for c, p in planned if p.per_question)
        missing = len(chosen) - len(planned)
        label = f"{len(planned)} cells, {sum(count(c, p) for c, p in planned)} questions"
        if missing:
            label += f" ({missing} cell(s) without a prediction not counted)"
        tokens_kind = weakest(p.tokens_kind for _, p in planned)
        numbers = [
            "",
            "",
            _num(calls, weakest(p.calls_kind for _, p in planned)),
            _num(tokens, tokens_kind),
            _num(prompt, tokens_kind),
            _computed_total(planned, count),
        ]
        out.append((name, short, label, numbers))
    return out


def _computed_total(planned: list[tuple[Cell, CellPlan]], count: Callable[[Cell, CellPlan], int]) -> str:
    """The computed prefill of the cells' questions ``count`` counts (a cell's share of its
    questions), or — when a cell has none."""
    if any(p.computed is None or not p.n_questions for _, p in planned):
        return "—"
    total = sum(count(c, p) / (p.n_questions or 1) * (p.computed or 0) for c, p in planned)
    return _num(total, weakest(p.computed_kind for _, p in planned))


def _all(c: Cell, p: CellPlan) -> int:
    return p.n_questions or 0


def _left(c: Cell, p: CellPlan) -> int:
    """Questions of an unfinished cell still to debate (all but a partial cell's done ones)."""
    return max(0, (p.n_questions or 0) - int(c.result.get("questions_done", 0)))


def _result(c: Cell, p: CellPlan | None) -> str:
    if c.status == "finished" and c.result:
        return f"accuracy {c.result.get('accuracy') or 0:.3f}, measured tokens {c.result.get('tokens', 0):,}"
    if c.status == "partial":
        return f"{c.result.get('questions_done', 0)} questions done"
    if c.error:
        return c.error
    return (p.note or "") if p is not None else ""
