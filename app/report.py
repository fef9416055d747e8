"""``debate report DIR``: tables and plots from one or many result directories.

Pure: reads Parquet with pyarrow (no pandas needed, no Ray, no model) and draws PNGs with
matplotlib's non-interactive Agg canvas (``matplotlib.figure.Figure``, never pyplot, so no
global backend state is touched).

Input. ``DIR`` is a run directory (``calls/ questions/ graphs/ runs/``), a directory holding
several runs (the runs table then has several rows), or a parent of many run directories at
any depth (a sweep): every folder with a ``runs/`` sub-folder is read. One *configuration* is
one ``run_id`` in one run directory; its ``config`` JSON (the runs table) gives the label.

Which rows count. A resumed run re-debates the questions an interrupted attempt left
unfinished, so the calls table can hold calls of attempts that never produced a question row.
:func:`complete_calls` keeps only the call rows whose ``(run_id, question_id, attempt)`` matches
a questions row (a null ``attempt``, written before the column existed, matches a null one);
when either table has no ``attempt`` column every call row is kept. Token and call counts come
from those calls; a run with no call rows at all falls back to the question rows' totals.

Metrics per configuration (``summary_rows``):

* accuracy = correct / n over its question rows, with the 95 % Wilson score interval
  (:func:`wilson_interval`);
* prompt / completion / total tokens and calls per question (sums over complete calls / n);
  summary calls (``agent_id == -1``) and skipped turns as run totals;
* savings vs the baseline protocol (``--baseline``, default MAD) = 1 - total_per_q / total_per_q
  of the baseline run, and the input-token saving 1 - prompt_per_q / prompt_per_q (the sparse
  paper's cost). The baseline run is the baseline-protocol run with the *same* agents, rounds,
  dataset (and ``limit``/``offset``), backend, models and seed (:data:`MATCH_KEYS`); with none,
  ``-`` — never the nearest other run. Per question, so runs of different lengths compare.
* across seeds: runs whose configurations differ only in ``seed`` (and in options that do not
  change results; :func:`engine.accounting.seed_groups`, as the sweep status) form a seed group; each of its
  rows shows the group's accuracy and total tokens per question as mean ± sd over the seeds
  (sample sd), next to the row's own Wilson interval (which covers question sampling only).
* prompt tokens per call (CortexDebate's context length).
* the prompt cache: prompt tokens per question the serving engine's prefix cache served
  (``calls.cached_prompt_tokens``) and those it computed (prompt - cached), both over the calls
  that report a cached count, and the cached share cached / (cached + computed)
  (:func:`engine.metrics.cached_share`); ``n/a`` when no call of the run reports one (the
  transformers and simulated backends, a server that does not send it, older folders).
* mean effective debate rounds (rounds until all agents first agree, per question);
* mean consensus proportion per round (:func:`consensus_curve`): a question that stopped early
  carries its last value forward to the longest question of the run (and to the configured
  number of rounds), as :func:`engine.accounting.summarize` does for the runs table.

Outputs (``REPORT_DIR``, default ``DIR/report``): ``summary.csv``, ``summary.json``, and each
figure of :data:`PLOTS` as PNG, PDF and SVG: ``accuracy_vs_tokens``, ``consensus_per_round``,
``accuracy_by_round``, ``accuracy_tokens_vs_agents`` and ``accuracy_tokens_vs_rounds`` (the last
two: means over seeds with 95 % Student-t intervals, :func:`seed_interval`, drawn from
:data:`MIN_SEEDS` seeds; skipped, with a note, when every configuration has the same number of
agents / rounds; ``accuracy_vs_tokens``: a point per configuration, :func:`config_point`), in
a :class:`FigureStyle` (``screen``, or ``paper``: column widths at 300 dpi, captions in
``<figure>.caption.txt``). Okabe-Ito colours per protocol, a marker per variant,
the legend below the panels, accuracy axes fitted to the data, more series than a panel reads
split into panels (:func:`_panels`). Simulated-backend data are labelled in every figure.
The printed table is split into :data:`SECTIONS` (accuracy, cost, savings, dynamics, cache), as
rich tables, Markdown or CSV (:func:`render_tables`, :func:`markdown_tables`, :func:`csv_table`).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from rich.table import Table
from rich.text import Text

from engine.accounting import carried_mean, mean_sd, seed_groups, summarize
from engine.config import RunConfig, stored_config, unhashed_options
from engine.formatting import fmt_num, shown_model
from engine.metrics import cached_share, format_share, metrics
from engine.protocols import SPECS
from engine.results import ResultsError, complete_calls, find_run_dirs, read_table
from engine.safe_text import inert

Z95 = 1.959963984540054  # two-sided 95 % normal quantile
PLOTS = (  # each also as .pdf and .svg
    "accuracy_vs_tokens.png",
    "consensus_per_round.png",
    "accuracy_by_round.png",
    "accuracy_tokens_vs_agents.png",
    "accuracy_tokens_vs_rounds.png",
)
# Config keys that never change results (RunConfig.run_id leaves them out): no run label names them.
_NOT_RESULT_KEYS = frozenset(unhashed_options())
_CALL_COLUMNS = (
    "run_id",
    "question_id",
    "attempt",
    "agent_id",
    "prompt_tokens",
    "completion_tokens",
    "cached_prompt_tokens",
)


def _question_columns() -> tuple[str, ...]:
    """The questions columns the report reads: the metrics that say so (engine/metrics.py,
    registered ones included) between the question's keys and its labels."""
    reported = (m.name for m in metrics() if m.report)
    return ("run_id", "question_id", "attempt", "protocol", "n_agents", "rounds_run", *reported, "backend", "simulated")


# Bad input to ``debate report`` (missing directory, no results); the message names the path.
ReportError = ResultsError


# ----------------------------------------------------------------------------- statistics
def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials (95 % by default).

    centre = (p + z^2/(2n)) / (1 + z^2/n),  half = z / (1 + z^2/n) * sqrt(p(1-p)/n + z^2/(4n^2)),
    with p = k/n. ``(nan, nan)`` when n = 0. All right (k = n) has upper bound exactly 1 and none
    right lower bound exactly 0, as the formula gives without rounding.
    """
    if n <= 0:
        return (math.nan, math.nan)
    p = k / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return (0.0 if k <= 0 else max(0.0, centre - half), 1.0 if k >= n else min(1.0, centre + half))


def consensus_curve(consensus: Iterable[Sequence[float] | None], length: int | None = None) -> list[float]:
    """Mean consensus per round over questions (:func:`engine.accounting.carried_mean`: a question
    with fewer rounds than the longest, or than ``length``, carries its last value forward)."""
    return carried_mean(consensus, length)


def savings(total_per_q: float, baseline_total_per_q: float) -> float:
    """Fraction of the baseline's tokens saved: 1 - total / baseline (negative = costs more)."""
    if not baseline_total_per_q or math.isnan(baseline_total_per_q) or math.isnan(total_per_q):
        return math.nan
    return 1.0 - total_per_q / baseline_total_per_q


# ----------------------------------------------------------------------------- reading
def _read(
    run_dir: Path,
    table: str,
    columns: Sequence[str] | None = None,
    skip_bad_parts: bool = False,
    notes: list[str] | None = None,
) -> pa.Table:
    """One table of a run directory, projected to ``columns`` (:func:`engine.results.read_table`:
    missing newer columns read as null, re-graded question rows replace the run's; an unreadable
    part raises, or with ``skip_bad_parts`` is left out with a line in ``notes``)."""
    return read_table(run_dir, table, list(columns) if columns else None, skip_bad_parts=skip_bad_parts, notes=notes)


@dataclass
class RunData:
    """One configuration: a run_id in one run directory."""

    run_dir: Path
    run_id: str
    run: dict[str, Any]  # the runs-table row ({} when the run has question rows but no run row)
    config: dict[str, Any]
    questions: list[dict[str, Any]]
    calls: dict[str, Any] | None  # totals over complete calls; None when the run has no call rows
    notes: list[str] = field(default_factory=list)


def _call_totals(calls: pa.Table) -> dict[str, dict[str, Any]]:
    """Per run id: its calls' token sums, calls and summary calls; cached and computed prompt
    tokens summed over the calls that report a cached count (None when none does)."""
    if not calls.num_rows:
        return {}
    summary = pc.equal(calls.column("agent_id"), -1)
    cached = calls.column("cached_prompt_tokens")
    t = (
        calls.select(["run_id", "prompt_tokens", "completion_tokens", "cached_prompt_tokens"])
        .append_column("summary", pc.cast(pc.fill_null(summary, False), pa.int64()))
        .append_column("computed_prompt_tokens", pc.subtract(calls.column("prompt_tokens"), cached))  # null: unknown
    )
    sums = ("prompt_tokens", "completion_tokens", "cached_prompt_tokens", "computed_prompt_tokens", "summary")
    agg = t.group_by("run_id").aggregate([*((c, "sum") for c in sums), ("run_id", "count")])
    return {
        r["run_id"]: {
            "prompt_tokens": r["prompt_tokens_sum"] or 0,
            "completion_tokens": r["completion_tokens_sum"] or 0,
            "calls": r["run_id_count"],
            "summary_calls": r["summary_sum"] or 0,
            "cached_prompt_tokens": r["cached_prompt_tokens_sum"],  # a sum over no known value is null
            "computed_prompt_tokens": r["computed_prompt_tokens_sum"],
        }
        for r in agg.to_pylist()
    }


def load_runs(path: str | Path, skip_bad_parts: bool = False, notes: list[str] | None = None) -> list[RunData]:
    """Read every configuration under ``path`` (see the module docstring). An unreadable part
    file raises :class:`ReportError` naming it; ``skip_bad_parts`` leaves it out, a line in
    ``notes`` naming it."""
    run_dirs = find_run_dirs(path)
    if not run_dirs:
        raise ReportError(f"{path}: no results (no folder with a runs/ sub-folder)")
    out: list[RunData] = []
    for d in run_dirs:
        runs = {r["run_id"]: r for r in _read(d, "runs", None, skip_bad_parts, notes).to_pylist()}
        qtab = _read(d, "questions", _question_columns(), skip_bad_parts, notes)
        ctab = complete_calls(_read(d, "calls", _CALL_COLUMNS, skip_bad_parts, notes), qtab)
        totals = _call_totals(ctab)
        by_run: dict[str, list[dict[str, Any]]] = {}
        for row in qtab.to_pylist():
            by_run.setdefault(row["run_id"], []).append(row)
        for run_id in sorted(set(runs) | set(by_run)):
            run = runs.get(run_id, {})
            try:
                config = json.loads(run.get("config") or "{}")
            except json.JSONDecodeError:
                config = {}
            config = stored_config(config) if isinstance(config, dict) else {}  # old option names: new
            data = RunData(d, run_id, run, config, by_run.get(run_id, []), totals.get(run_id))
            if not run:
                data.notes.append(f"{d}: run {run_id} has question rows but no runs row (label from the questions)")
            qt = sum((q["prompt_tokens"] or 0) + (q["completion_tokens"] or 0) for q in data.questions)
            if data.calls is not None and data.calls["prompt_tokens"] + data.calls["completion_tokens"] != qt:
                data.notes.append(
                    f"{d}: run {run_id}: complete calls hold "
                    f"{data.calls['prompt_tokens'] + data.calls['completion_tokens']} tokens, its question "
                    f"rows {qt}; the report uses the calls"
                )
            out.append(data)
    if not out:
        raise ReportError(f"{path}: no runs recorded (the runs/ tables of {len(run_dirs)} folder(s) are empty)")
    return out


# ----------------------------------------------------------------------------- labels
def _shape(data: RunData) -> tuple[str, int | None, int | None]:
    cfg = data.config
    protocol = (
        cfg.get("protocol") or data.run.get("protocol") or (data.questions[0]["protocol"] if data.questions else "?")
    )
    agents = cfg.get("agents")
    if agents is None and data.questions:
        agents = data.questions[0]["n_agents"]
    rounds = cfg.get("rounds")
    if rounds is None and data.questions:
        rounds = max(q["rounds_run"] or 0 for q in data.questions)
    if protocol in SPECS and agents is not None and rounds is not None:  # CoT: 1 x 1, CoT-SC: k x 1
        run = RunConfig.from_stored({**cfg, "protocol": protocol, "agents": agents, "rounds": rounds})
        agents, rounds = SPECS[protocol].shape(run)
    return protocol, agents, rounds


def _simulated(data: RunData) -> bool:
    return (
        bool(data.run.get("simulated"))
        or any(bool(q.get("simulated")) for q in data.questions)
        or (data.config.get("backend") == "simulated")
    )


def base_label(data: RunData) -> str:
    """protocol + agents x rounds + density / topology / groups when set + (SIMULATED)."""
    protocol, agents, rounds = _shape(data)
    cfg = data.config
    parts = [protocol, f"{agents if agents is not None else '?'}x{rounds if rounds is not None else '?'}"]
    if protocol in SPECS:
        parts += SPECS[protocol].label_parts(cfg)  # what tells two runs of it apart (density, groups)
    label = " ".join(parts)
    return label + (" (SIMULATED)" if _simulated(data) else "")


def _labels(runs: list[RunData]) -> list[str]:
    """Base labels, with the config keys that differ appended where two runs share a label."""
    labels = [base_label(r) for r in runs]
    groups: dict[str, list[int]] = {}
    for i, lab in enumerate(labels):
        groups.setdefault(lab, []).append(i)
    out = list(labels)
    for lab, idx in groups.items():
        if len(idx) < 2:
            continue
        keys = sorted({k for i in idx for k in runs[i].config} - _NOT_RESULT_KEYS)
        differ = [
            k for k in keys if len({json.dumps(runs[i].config.get(k), sort_keys=True, default=str) for i in idx}) > 1
        ]
        first = ["dataset", "seed", "limit", "offset"]
        differ = sorted(differ, key=lambda k: (first.index(k) if k in first else len(first), k))
        for i in idx:
            extra = []
            for k in differ:
                v = runs[i].config.get(k)
                v = Path(v).name if k == "dataset" and isinstance(v, str) else v
                extra.append(f"{k}={v if not isinstance(v, float) else fmt_num(v)}")
            out[i] = (
                lab.replace(" (SIMULATED)", "")
                + ("" if not extra else " " + " ".join(extra))
                + (" (SIMULATED)" if lab.endswith("(SIMULATED)") else "")
            )
        if len({out[i] for i in idx}) < len(idx):  # same config written into several directories
            for i in idx:
                out[i] = (
                    out[i].replace(" (SIMULATED)", "")
                    + f" [{runs[i].run_dir.name}]"
                    + (" (SIMULATED)" if lab.endswith("(SIMULATED)") else "")
                )
    return out


# ----------------------------------------------------------------------------- the table
def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


def summarize_run(data: RunData) -> dict[str, Any]:
    """One row of the summary table (without label and savings)."""
    qs = data.questions
    n = len(qs)
    protocol, agents, rounds = _shape(data)
    run = summarize(qs)  # the engine's one run summary; tokens from the complete calls where there are any
    k = run["n_correct"]
    lo, hi = wilson_interval(k, n)
    if data.calls is not None:
        prompt, completion = data.calls["prompt_tokens"], data.calls["completion_tokens"]
        calls, summary_calls = data.calls["calls"], data.calls["summary_calls"]
        cached, computed = data.calls["cached_prompt_tokens"], data.calls["computed_prompt_tokens"]
    else:
        prompt, completion = run["prompt_tokens"], run["completion_tokens"]
        calls, summary_calls = run["n_calls"], run["n_summary_calls"]
        cached, computed = run["cached_prompt_tokens"], run["computed_prompt_tokens"]
    total = prompt + completion
    per_q = (lambda x: x / n) if n else (lambda x: math.nan)
    length = rounds if (rounds and any(q.get("stopped_early") for q in qs)) else None
    cfg = data.config
    row: dict[str, Any] = {
        "run_id": data.run_id,
        "run_dir": str(data.run_dir),
        "protocol": protocol,
        "backend": cfg.get("backend") or data.run.get("backend"),
        "simulated": _simulated(data),
        "status": data.run.get("status"),
        "agents": agents,
        "rounds": rounds,
        "density": cfg.get("density"),
        "limit": cfg.get("limit"),
        "offset": cfg.get("offset"),
        "models": _models_of(cfg, _simulated(data)),
        "groups": cfg.get("groups"),
        "dataset": cfg.get("dataset"),
        "seed": cfg.get("seed"),
        "n_questions": n,
        "correct": k,
        "accuracy": k / n if n else math.nan,
        "accuracy_lo": lo,
        "accuracy_hi": hi,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": total,
        "prompt_per_q": per_q(prompt),
        "completion_per_q": per_q(completion),
        "total_per_q": per_q(total),
        "calls": calls,
        "calls_per_q": per_q(calls),
        "prompt_per_call": prompt / calls if calls else math.nan,
        "summary_calls": summary_calls,
        "errored_questions": run["n_errored_questions"],
        "consensus_by_round": consensus_curve((q["consensus"] for q in qs), length),
        # the vote after each round, graded (older runs without the column: empty)
        "accuracy_by_round": consensus_curve(
            ([float(c) for c in q["correct_by_round"]] for q in qs if q.get("correct_by_round")), length
        ),
        "accuracy_by_round_n": sum(bool(q.get("correct_by_round")) for q in qs),
        "placement": placement_text(data.run.get("placement"), _simulated(data)),
        # over the calls that report a cached count (vLLM, some servers); None: no call does
        "cached_prompt_tokens": cached,
        "computed_prompt_tokens": computed,
        "cached_per_q": None if cached is None else per_q(cached),
        "computed_per_q": None if computed is None else per_q(computed),
        "cached_share": cached_share(cached, computed),
    }
    return with_metric_columns(row, run)


def with_metric_columns(row: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """``row`` with the run aggregate of each metric that declares a report column
    (:attr:`engine.metrics.Metric.column`, e.g. ``ties``), each placed after the column it names;
    ``run`` is the run summary (:func:`engine.accounting.summarize`). A mean over no questions
    is nan. Raises ValueError for a column placed after one the row does not have."""
    n = run["n_questions"]
    pending = [
        (m.column.name, m.column.after, math.nan if m.agg == "mean" and not n else run[m.summary])
        for m in metrics()
        if m.column is not None and m.summary is not None
    ]
    items = list(row.items())
    while pending:
        ready = [p for p in pending if p[1] in dict(items)]
        if not ready:
            raise ValueError(f"report columns placed after a column the summary lacks: {[p[:2] for p in pending]}")
        for p in ready:
            items.insert([k for k, _ in items].index(p[1]) + 1, (p[0], p[2]))
            pending.remove(p)
    return dict(items)


def placement_text(placement_json: str | None, simulated: bool = False) -> str:
    """One line from a runs row's ``placement`` JSON: where each replica (model#index), the
    agent groups, embedder, writer and coordinator ran -- node IP and GPU ids; a tensor-parallel
    replica's bundles are counted per node. What ran in one place is named once, before it
    (``m#0, agents ×2, writer, coordinator @ 10.0.0.1``). A ``simulated`` run's replicas are
    named ``simulated#0`` (``simulated:NAME#0`` where it has several models): no model ran. ""
    for runs recorded without it."""
    if not placement_json:
        return ""
    try:
        entries = json.loads(placement_json)
    except ValueError:
        return "(unreadable)"
    replicas = [e for e in entries if e.get("role") == "replica"]
    several = len({e.get("model") for e in replicas}) > 1
    parts = []
    for e in entries:
        name = str(e.get("role"))
        if e.get("role") == "replica":
            model = e.get("model") if not simulated else f"simulated:{e.get('model')}" if several else "simulated"
            name = f"{model}#{e.get('replica')}"
        where = str(e.get("node_ip") or (e.get("node_id") or "?")[:8])
        if e.get("gpu_ids"):
            where += f" GPU {','.join(map(str, e['gpu_ids']))}"
        if e.get("bundle_nodes"):
            nodes = e["bundle_nodes"]
            where += f" ({len(nodes)} bundles on {len(set(nodes))} node{'s' if len(set(nodes)) > 1 else ''})"
        if e.get("device"):
            where += f" {e['device']}"
        parts.append((name, where))
    return "; ".join(f"{', '.join(_counted(names))} @ {where}" for where, names in _by_place(parts).items())


def _by_place(parts: list[tuple[str, str]]) -> dict[str, list[str]]:
    """The names of ``(name, where)`` pairs grouped by where, in order of first appearance."""
    places: dict[str, list[str]] = {}
    for name, where in parts:
        places.setdefault(where, []).append(name)
    return places


def _counted(names: list[str]) -> list[str]:
    """Repeated names once, with their count (``agents ×3``), in order of first appearance."""
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return [name if n == 1 else f"{name} ×{n}" for name, n in counts.items()]


# what a baseline run must share with a row for its savings to be shown
MATCH_KEYS = ("agents", "rounds", "dataset", "limit", "offset", "backend", "models", "seed")


def pick_baseline(row: dict[str, Any], candidates: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, bool]:
    """The baseline run for ``row``: a candidate with the same :data:`MATCH_KEYS` (the row itself
    first, then the one with most questions); ``(None, False)`` when there is none -- savings are
    never taken against a run that differs in any of them. The bool is kept for the files
    (``baseline_exact``): always True when a run is returned."""
    usable = [
        c
        for c in candidates
        if c["n_questions"] and c["total_per_q"] == c["total_per_q"] and all(c.get(k) == row.get(k) for k in MATCH_KEYS)
    ]
    if not usable:
        return None, False
    return max(usable, key=lambda c: (c is row, c["n_questions"])), True


def _models_of(cfg: dict[str, Any], simulated: bool = False) -> str:
    """The models a run used, as one comparable string (per-agent settings included); a
    ``simulated`` run's names as :func:`engine.formatting.shown_model` shows them (no model ran)."""
    models = cfg.get("models") or cfg.get("model")
    per_agent = [a.get("model") for a in cfg.get("agent_settings") or [] if isinstance(a, dict)]
    if simulated:
        several = bool(cfg.get("models")) or len({models, *per_agent} - {None}) > 1
        models = shown_model(models, True, several)
        per_agent = [shown_model(m, True, True) for m in per_agent]
    return json.dumps([models, per_agent], default=str)


def _seed_settings(data: RunData) -> dict[str, Any]:
    """A run's settings for seed grouping: its config, and whether its model was simulated."""
    return {**data.config, "__simulated": _simulated(data)}


def add_seed_stats(rows: list[dict[str, Any]], runs: list[RunData]) -> None:
    """Mean ± sd over the seeds of each seed group (2+ different seeds,
    :func:`engine.accounting.seed_groups`), on every row of it."""
    with_questions = [i for i, _ in enumerate(runs) if rows[i]["n_questions"]]
    groups = seed_groups(with_questions, lambda i: _seed_settings(runs[i]), _NOT_RESULT_KEYS)
    for row in rows:
        row.update(
            seeds=None,
            accuracy_seeds_mean=math.nan,
            accuracy_seeds_sd=math.nan,
            total_per_q_seeds_mean=math.nan,
            total_per_q_seeds_sd=math.nan,
        )
    for idx in groups:
        acc = mean_sd([rows[i]["accuracy"] for i in idx])
        tok = mean_sd([rows[i]["total_per_q"] for i in idx])
        for i in idx:
            rows[i].update(
                seeds=len(idx),
                accuracy_seeds_mean=acc[0],
                accuracy_seeds_sd=acc[1],
                total_per_q_seeds_mean=tok[0],
                total_per_q_seeds_sd=tok[1],
            )


def summary_rows(runs: list[RunData], baseline: str = "mad") -> list[dict[str, Any]]:
    """The summary table: one dict per configuration, sorted by protocol, agents, rounds, label.
    A label quotes run options: it is made inert (:func:`engine.safe_text.inert`), for the
    terminal, the figures and the notes alike."""
    rows = [summarize_run(r) for r in runs]
    for row, label in zip(rows, _labels(runs)):
        row["label"] = inert(label, lines=False)
    candidates = [r for r in rows if r["protocol"] == baseline]
    for row in rows:
        base, exact = pick_baseline(row, candidates)
        row["baseline_run_id"] = base["run_id"] if base else None
        row["baseline_run_dir"] = base["run_dir"] if base else None
        row["baseline_label"] = base["label"] if base else None
        row["baseline_exact"] = exact if base else None
        row["savings"] = savings(row["total_per_q"], base["total_per_q"]) if base else math.nan
        row["input_savings"] = savings(row["prompt_per_q"], base["prompt_per_q"]) if base else math.nan
    add_seed_stats(rows, runs)
    order = {p: i for i, p in enumerate(SPECS)}
    rows.sort(
        key=lambda r: (order.get(r["protocol"], 99), r["protocol"], r["agents"] or 0, r["rounds"] or 0, r["label"])
    )
    keys = ["label"] + [k for k in rows[0] if k != "label"] if rows else []
    return [{k: r[k] for k in keys} for r in rows]


# ----------------------------------------------------------------------------- formatting
def _f(x: float, spec: str) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _known(x: float | None, spec: str) -> str:
    """A count some backends cannot give: ``n/a`` when unknown (None), else as :func:`_f`."""
    return "n/a" if x is None else _f(x, spec)


def format_row(row: dict[str, Any]) -> list[str]:
    """Display strings of one row, in the order of :data:`COLUMNS`."""
    acc = (
        "-"
        if not row["n_questions"]
        else (f"{row['accuracy']:.3f} [{row['accuracy_lo']:.3f}, {row['accuracy_hi']:.3f}]")
    )
    if row["baseline_run_id"] is None or math.isnan(row["savings"]):
        sav = "-"
    elif (row["baseline_run_id"], row["baseline_run_dir"]) == (row["run_id"], row["run_dir"]):
        sav = "base"
    else:
        sav = f"{100 * row['savings']:+.1f}% / {100 * row['input_savings']:+.1f}%"
    seeds = (
        "-"
        if not row.get("seeds")
        else (f"{row['accuracy_seeds_mean']:.3f} ± {row['accuracy_seeds_sd']:.3f} ({row['seeds']})")
    )
    return [
        row["label"],
        str(row["n_questions"]),
        acc,
        seeds,
        _f(row["prompt_per_q"], ",.1f"),
        _f(row["completion_per_q"], ",.1f"),
        _f(row["total_per_q"], ",.1f"),
        _f(row["calls_per_q"], ".2f"),
        _f(row["prompt_per_call"], ",.1f"),
        str(row["summary_calls"]),
        str(row["skipped_turns"]),
        sav,
        _f(row["effective_rounds"], ".2f"),
        " ".join(f"{c:.2f}" for c in row["consensus_by_round"]) or "-",
        " ".join(f"{c:.2f}" for c in row["accuracy_by_round"]) or "-",
        _known(row["cached_per_q"], ",.1f"),
        _known(row["computed_per_q"], ",.1f"),
        format_share(row["cached_share"]),
    ]


COLUMNS = (
    "configuration",
    "n",
    "accuracy [95% Wilson]",
    "accuracy over seeds (mean ± sd, k)",
    "prompt tok/q",
    "compl. tok/q",
    "total tok/q",
    "calls/q",
    "prompt tok/call",
    "summary calls",
    "skipped turns",
    "savings vs {baseline}: total / input",
    "eff. rounds",
    "consensus by round",
    "accuracy by round",
    "cached tok/q",
    "computed tok/q",
    "cached share",
)


# the summary split into tables narrow enough for an 80-column terminal, each a selection of
# COLUMNS (the configuration first): accuracy (n, Wilson, over seeds, by round), cost (tokens and
# calls per question), savings against the baseline, and dynamics (effective rounds, consensus by
# round, skipped turns, summary calls), and the prompt cache (cached and computed prompt tokens)
SECTIONS: dict[str, tuple[str, ...]] = {
    "accuracy": (*COLUMNS[0:4], COLUMNS[14]),
    "cost": (COLUMNS[0], *COLUMNS[4:9]),
    "savings": (COLUMNS[0], COLUMNS[11]),
    "dynamics": (COLUMNS[0], COLUMNS[12], COLUMNS[13], COLUMNS[10], COLUMNS[9]),
    "cache": (COLUMNS[0], *COLUMNS[15:18]),
}
CAPTIONS = {
    "accuracy": "accuracy = correct / n with the 95% Wilson interval (question sampling); over seeds: "
    "mean ± sample sd of the runs that differ only in seed, k seeds; by round: the vote after each round",
    "cost": "tokens and calls per question, over the calls of finished questions",
    "savings": "savings = 1 - tok/q / the {baseline} run's, total and input (prompt) tokens, against a "
    "{baseline} run with the same agents, rounds, dataset, backend, models and seed; - = none",
    "dynamics": "eff. rounds: rounds until all agents first agree; consensus: mean share agreeing with the "
    "majority after each round (stopped questions carry their last value); summary calls: in all",
    "cache": "prompt tokens per question that the serving engine's prefix cache served (cached) and that it "
    "computed (prompt - cached), over the calls that report a cached count (vLLM; servers that send "
    "usage.prompt_tokens_details); share = cached / (cached + computed); n/a: no call reports it",
}


def section_cells(rows: list[dict[str, Any]], section: str, baseline: str = "mad") -> tuple[list[str], list[list[str]]]:
    """Header and display cells of one of :data:`SECTIONS` (the strings :func:`format_row` makes;
    labels without "(SIMULATED)" when every row is, as the title then says)."""
    index = [COLUMNS.index(c) for c in SECTIONS[section]]
    header = [COLUMNS[i].format(baseline=baseline) for i in index]
    body = [[cells[i] for i in index] for cells in map(format_row, rows)]
    if rows and all(r["simulated"] for r in rows):  # the title says so once
        body = [[cells[0].replace(" (SIMULATED)", ""), *cells[1:]] for cells in body]
    return header, body


ROUND_COLUMNS = ("consensus by round", "accuracy by round")  # a value per round: wrap at spaces


def _frame(columns: int) -> int:
    """The characters a rich table of ``columns`` columns adds to their contents: a border left of
    each and one at the end, a space of padding each side of each."""
    return 3 * columns + 1


def column_widths(header: list[str], body: list[list[str]], width: int) -> list[int]:
    """The content width of each column of a summary table for a console ``width`` wide.

    Every column but the configuration (first) and the by-round ones holds its widest cell and
    the widest word of its header: no number wraps. Those flexible ones get their widest cell
    where the width allows; else the by-round columns get what the configuration, folded to no
    fewer than 16 characters, leaves them, shared, each at least its widest single value or
    header word (rich's own collapse ignores a column's minimum, and a table wider than the
    console loses its right edge)."""
    widest = [max((len(r[i]) for r in body), default=1) for i in range(len(header))]
    word = [
        max(len(w) for w in [*header[i].split(), *(w for r in body for w in r[i].split())]) for i in range(len(header))
    ]
    fixed = [i for i, name in enumerate(header) if i and name not in ROUND_COLUMNS]
    out = list(widest)
    for i in fixed:
        out[i] = max(widest[i], *(len(w) for w in header[i].split()))
    flex = [i for i in range(len(header)) if i not in fixed]
    room = width - _frame(len(header)) - sum(out[i] for i in fixed)
    if sum(widest[i] for i in flex) <= room:
        return out
    rounds = [i for i in flex if i]
    out[0] = min(widest[0], max(16, room - sum(widest[i] for i in rounds)))
    share = max(0, room - out[0]) // max(1, len(rounds))
    for i in rounds:
        out[i] = max(word[i], min(widest[i], share))
    return out


def fitting_columns(header: list[str], body: list[list[str]], width: int) -> tuple[list[int], list[int]]:
    """The columns (indices) a table ``width`` wide can show whole, and their widths
    (:func:`column_widths`): all where they fit, else the configuration and as many of the next
    ones as fit at their narrowest (the rest would be cut: rich shortens a cell that does not fit
    with "…")."""
    keep = list(range(len(header)))
    while True:
        widths = column_widths([header[i] for i in keep], [[r[i] for i in keep] for r in body], width)
        if len(keep) <= 2 or sum(widths) + _frame(len(keep)) <= width:
            return keep, widths
        keep.pop()


def render_tables(rows: list[dict[str, Any]], baseline: str = "mad", width: int = 80) -> list[Any]:
    """The summary as rich Tables, one per :data:`SECTIONS` (accuracy, cost, savings, dynamics,
    cache), for a console ``width`` wide. No number is ever wrapped: the widths come from
    :func:`column_widths` (a header wraps at spaces, the configuration label folds, the by-round
    values wrap between values). Cells are text, never markup (a label quotes run options)."""
    tables = []
    for section in SECTIONS:
        header, body = section_cells(rows, section, baseline)
        caption = CAPTIONS[section].format(baseline=baseline)
        keep, widths = fitting_columns(header, body, width)
        if len(keep) < len(header):
            left = [header[i] for i in range(len(header)) if i not in keep]
            caption += f" (left out at {width} columns: {', '.join(left)}; a wider terminal or --format md shows them)"
            header, body = [header[i] for i in keep], [[r[i] for i in keep] for r in body]
        table = Table(
            title=f"debate report: {section}" + _sim_title(rows),
            caption=caption,
            caption_justify="left",
            min_width=min(60, width),  # room for the caption of a narrow section (savings)
        )
        for i, (name, w) in enumerate(zip(header, widths, strict=True)):
            if i == 0:
                table.add_column(name, overflow="fold", width=w)
            else:
                table.add_column(name, justify="left" if name in ROUND_COLUMNS else "right", width=w)
        for cells in body:
            table.add_row(*map(Text, cells))
        tables.append(table)
    return tables


def markdown_tables(rows: list[dict[str, Any]], baseline: str = "mad") -> str:
    """The tables of :data:`SECTIONS` as GitHub-flavoured Markdown, each under a heading
    with its caption; ``|`` in a cell is escaped."""
    out = []
    for section in SECTIONS:
        header, body = section_cells(rows, section, baseline)
        out += [f"### {section}", "", CAPTIONS[section].format(baseline=baseline), ""]
        for i, cells in enumerate([header, *body]):
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
            if i == 0:
                out.append("|" + "|".join("---" if j == 0 else "---:" for j in range(len(cells))) + "|")
        out.append("")
    return "\n".join(out)


def csv_table(rows: list[dict[str, Any]], baseline: str = "mad") -> str:
    """Every display column (:data:`COLUMNS`, the cells the tables show) as one CSV, a header
    line and a line per configuration. (``summary.csv`` holds the raw numbers.)"""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([c.format(baseline=baseline) for c in COLUMNS])
    w.writerows(format_row(r) for r in rows)
    return buf.getvalue()


def _jsonable(x: Any) -> Any:
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, list):
        return [_jsonable(v) for v in x]
    return x


def write_summary(rows: list[dict[str, Any]], out_dir: Path, source: str, baseline: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = out_dir / "summary.csv", out_dir / "summary.json"
    keys = list(rows[0]) if rows else ["label"]
    with open(csv_path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow(
                {
                    k: (
                        " ".join(f"{c:.6g}" for c in r[k])
                        if isinstance(r[k], list)
                        else ("" if r[k] is None or (isinstance(r[k], float) and math.isnan(r[k])) else r[k])
                    )
                    for k in keys
                }
            )
    doc = {
        "source": source,
        "baseline": baseline,
        "configurations": [{k: _jsonable(v) for k, v in r.items()} for r in rows],
    }
    json_path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    return [csv_path, json_path]


# ----------------------------------------------------------------------------- plots
# Okabe & Ito's colour-blind-safe palette, strongest contrast on white first (yellow last).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
MARKERS = ("o", "s", "D", "^", "v", "P", "X", "<", ">", "h")
LINESTYLES = ("-", "--", ":", "-.")
FORMATS = (".png", ".pdf", ".svg")  # every figure is written in each
# Seeds a point needs before its Student-t interval is drawn. With k = 2 the 95 % half width is
# t(0.975, 1) * sd / sqrt(2) = 9.0 sd, an interval that says nothing but covers the panel; from
# k = 3 it is 2.5 sd (k = 5: 1.2 sd). Points with fewer seeds are drawn as means, and say so.
MIN_SEEDS = 3


@dataclass(frozen=True)
class FigureStyle:
    """How the report's figures are sized and lettered (``debate report --style``).

    ``width`` is a one-panel figure's width in inches, ``wide`` a faceted or two-panel one's,
    ``height`` one row of panels; ``font`` / ``small`` the point sizes of labels / ticks,
    legends and notes; ``max_series`` the most lines or point series in one panel (more are
    split into panels, small multiples sharing their axes). ``paper`` figures are saved at
    exactly their width (no cropping, legends below the axes, no long title: the caption text
    goes to ``<figure>.caption.txt``); ``screen`` ones are cropped to what is drawn."""

    name: str
    width: float
    wide: float
    height: float
    dpi: int
    font: float
    small: float
    max_series: int
    marker: float
    line: float

    @property
    def paper(self) -> bool:
        return self.name == "paper"


SCREEN = FigureStyle("screen", 8.0, 11.0, 4.2, 110, 10, 8, 6, 6.0, 1.5)
PAPER = FigureStyle("paper", 3.5, 7.2, 2.3, 300, 8, 7, 5, 3.5, 1.0)  # one / two journal columns
STYLES = {s.name: s for s in (SCREEN, PAPER)}


def _rc(style: FigureStyle) -> dict[Any, Any]:
    """The matplotlib settings of ``style``: type-42 PDF fonts, fixed SVG ids, point sizes."""
    return {
        "pdf.fonttype": 42,
        "svg.hashsalt": "debate-report",
        "font.size": style.font,
        "axes.titlesize": style.font,
        "axes.labelsize": style.font,
        "figure.titlesize": style.font + 1,
        "xtick.labelsize": style.small,
        "ytick.labelsize": style.small,
        "legend.fontsize": style.small,
        "legend.title_fontsize": style.small,
        "lines.markersize": style.marker,
        "lines.linewidth": style.line,
        "errorbar.capsize": style.marker / 2,
        "axes.linewidth": 0.6 if style.paper else 0.8,
        "grid.linewidth": 0.4 if style.paper else 0.8,
    }


def _figure(style: FigureStyle, nrows: int = 1, ncols: int = 1, wide: bool = False, sharey: Any = True):
    """A figure of ``nrows`` x ``ncols`` axes sharing x (and y, or per ``sharey``), on
    matplotlib's Agg canvas (never pyplot), ``style.wide`` wide when it has several columns or
    ``wide``, else ``style.width``; laid out by matplotlib's constrained layout. Returns the
    figure and its axes, row by row."""
    # function-level: importing matplotlib.backends.backend_agg here keeps it off start-up
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure  # rendered with the Agg canvas; pyplot is never imported

    width = style.wide if wide or ncols > 1 else style.width
    fig = Figure(figsize=(width, style.height * nrows), dpi=style.dpi, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, sharex=True, sharey=sharey, squeeze=False)
    return fig, [ax for row in axes for ax in row]


def figure_paths(png: Path) -> list[Path]:
    """The files one figure is written to: ``png``, the PDF and SVG beside it, and (paper
    style) its caption text."""
    return [*(png.with_suffix(ext) for ext in FORMATS), png.with_suffix(".caption.txt")]


def _save(fig, png: Path, style: FigureStyle = SCREEN, caption: str = "") -> list[Path]:
    """Write ``fig`` as PNG, PDF and SVG (same stem) at ``style.dpi``. Screen figures are
    cropped to what is drawn (``bbox_inches="tight"``); paper ones keep their size, so a
    3.5 in figure prints at 3.5 in, and their ``caption`` is written to ``<stem>.caption.txt``.
    PDF fonts are embedded as TrueType (type 42, as journals ask) and no creation date is
    written, so a report of the same data writes the same PDF/SVG bytes."""
    # function-level: importing matplotlib here keeps it off start-up
    from matplotlib import rc_context

    paths = figure_paths(png)[: len(FORMATS)]
    crop = {} if style.paper else {"bbox_inches": "tight", "pad_inches": 0.08}
    with rc_context(_rc(style)):
        for path in paths:
            meta = {"CreationDate": None} if path.suffix == ".pdf" else {"Date": None} if path.suffix == ".svg" else {}
            fig.savefig(path, dpi=style.dpi, metadata=meta or None, **crop)
    if style.paper and caption:
        text = png.with_suffix(".caption.txt")
        text.write_text(caption + "\n")
        paths.append(text)
    return paths


def _legend(fig, axes: list[Any], style: FigureStyle, title: str | None = None) -> None:
    """One legend for the figure, each label once over ``axes``, below the panels in columns
    as wide as the figure (never over data, nor beside a long title)."""
    entries: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    if entries:
        ncols = min(len(entries), 2 if fig.get_figwidth() < 5 else 3 if fig.get_figwidth() < 9 else 4)
        fig.legend(list(entries.values()), list(entries), title=title, loc="outside lower center", ncols=ncols)


def _title(fig, style: FigureStyle, text: str, rows: list[dict[str, Any]]) -> str:
    """Title ``fig``: ``text`` (with the simulated-data note) on screen; in a paper only the
    note, if any (the caption says the rest). Returns the caption text."""
    caption = text + _sim_suffix(rows)
    if not style.paper:
        fig.suptitle(caption)
    elif _sim_suffix(rows):
        fig.suptitle(_sim_suffix(rows).removeprefix(" — "), color="#D55E00")
    return caption


def _fit_y(axes: list[Any], floor: float | None = None, ceil: float | None = None, span: float = 0.1) -> None:
    """Fit the y axis of ``axes`` (shared) to what is drawn on them, error bars included: the
    data's range, widened to ``span`` without crossing ``floor`` / ``ceil`` (accuracy all 1.0:
    0.9 to 1.0), plus 6 % each side (so a point on a bound shows whole)."""
    lows = [ax.dataLim.y0 for ax in axes if ax.has_data()]
    highs = [ax.dataLim.y1 for ax in axes if ax.has_data()]
    if not lows:
        return
    lo, hi = min(lows), max(highs)
    if hi - lo < span:
        mid = (lo + hi) / 2
        lo, hi = mid - span / 2, mid + span / 2
        if floor is not None and lo < floor:
            lo, hi = floor, floor + span
        if ceil is not None and hi > ceil:
            lo, hi = ceil - span, ceil
    pad = 0.06 * (hi - lo)
    for ax in axes:
        ax.set_ylim(lo - pad, hi + pad)


def _panels(series: dict[str, str], most: int) -> list[list[str]]:
    """Split the series (label -> protocol) into panels of at most ``most`` labels each: all in
    one when they fit, else the fewest panels :func:`_fill` makes with a cap between an even
    share and ``most``, the smallest such cap (the most even panels)."""
    labels = list(series)
    if len(labels) <= most:
        return [labels]
    groups: dict[str, list[str]] = {}
    for label, protocol in series.items():
        groups.setdefault(protocol, []).append(label)
    even = math.ceil(len(labels) / math.ceil(len(labels) / most))
    tries = [_fill(list(groups.values()), cap) for cap in range(even, most + 1)]
    return min(tries, key=len)  # the first of the fewest


def _fill(groups: list[list[str]], cap: int) -> list[list[str]]:
    """Fill panels of at most ``cap`` labels in order, a group (a protocol's series) kept in one
    panel, or split into near-equal parts when it has more than ``cap``."""
    panels: list[list[str]] = [[]]
    for group in groups:
        size = math.ceil(len(group) / math.ceil(len(group) / cap))
        for i in range(0, len(group), size):
            piece = group[i : i + size]
            if panels[-1] and len(panels[-1]) + len(piece) > cap:
                panels.append([])
            panels[-1].extend(piece)
    return panels


GRID_COLUMNS = 3  # panels a row of a faceted figure (:func:`_grid`)


def _grid(style: FigureStyle, n: int, sharey: Any = True):
    """A figure of ``n`` panels (up to three a row; unused cells removed). Returns the figure
    and its first ``n`` axes."""
    ncols = min(n, GRID_COLUMNS)
    fig, axes = _figure(style, math.ceil(n / ncols), ncols, sharey=sharey)
    for ax in axes[n:]:
        ax.remove()
    return fig, axes[:n]


def _label_grid(axes: list[Any], xlabel: str, ylabel: str) -> None:
    """Label the panels of a :func:`_grid`: x on the lowest panel of each column, y on the first
    of each row."""
    ncols = min(len(axes), GRID_COLUMNS)
    for ax in axes[-ncols:]:
        ax.set_xlabel(xlabel)
    for ax in axes[::ncols]:
        ax.set_ylabel(ylabel)


def _panel_title(ax, labels: list[str], series: dict[str, str], several: bool) -> None:
    """Name a panel of a faceted figure by the protocols it shows."""
    if several:
        ax.set_title(", ".join(dict.fromkeys(series[label] for label in labels)))


def _sim_title(rows: list[dict[str, Any]]) -> str:
    """The table title's data note: every row simulated, some (marked in their labels), or none."""
    n_sim = sum(bool(r["simulated"]) for r in rows)
    if not n_sim:
        return ""
    if n_sim == len(rows):
        return " [bold red](SIMULATED data)[/]"
    return f" [bold red]({n_sim} of {len(rows)} rows SIMULATED: labelled so)[/]"


def _sim_suffix(rows: list[dict[str, Any]]) -> str:
    n_sim = sum(bool(r["simulated"]) for r in rows)
    if not n_sim:
        return ""
    return " — SIMULATED backend" if n_sim == len(rows) else " — includes SIMULATED runs (*)"


def _short(row: dict[str, Any], rows: list[dict[str, Any]], drop: Sequence[str] = ()) -> str:
    """Legend label of a row: its label without '(SIMULATED)' when the title says so ('*' when
    mixed), and without the words naming ``drop`` ("seed": ``seed=1``; "agents"/"rounds": the
    ``NxT`` shape, replaced by the other of the two, e.g. ``T=3``)."""
    words = row["label"].replace(" (SIMULATED)", "").split()
    if "seed" in drop:
        words = [w for w in words if not w.startswith("seed=")]
    if "agents" in drop or "rounds" in drop:
        kept = f"T={row['rounds']}" if "agents" in drop else f"N={row['agents']}"
        words = [words[0], kept, *words[2:]] if len(words) > 1 else words
    mixed = 0 < sum(bool(r["simulated"]) for r in rows) < len(rows)
    return " ".join(words) + (" *" if mixed and row["simulated"] else "")


def _styles(rows: list[dict[str, Any]], drop: Sequence[str] = ("seed",)) -> dict[str, tuple[str, str, str]]:
    """(colour, marker, linestyle) per legend label (:func:`_short` with ``drop``): one colour per
    protocol; each label its own marker (unique up to the number of markers, so a series reads
    in black and white too), and per variant of a protocol (other options, e.g. density 0.5 vs
    1.0) its own line style."""
    colours = {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(dict.fromkeys(r["protocol"] for r in rows))}
    count: dict[str, int] = {}
    out: dict[str, tuple[str, str, str]] = {}
    for r in rows:
        label = _short(r, rows, drop)
        if label in out:
            continue
        i = count.get(r["protocol"], 0)
        count[r["protocol"]] = i + 1
        out[label] = (colours[r["protocol"]], MARKERS[len(out) % len(MARKERS)], LINESTYLES[i % len(LINESTYLES)])
    return out


def _bar(y: float, lo: float, hi: float) -> list[list[float]]:
    """Matplotlib's ``yerr`` for one point at ``y`` with the interval ``[lo, hi]``: the distances
    below and above, never negative (an interval bound computed as 0.9999999999999999 for an
    accuracy of 1.0 would otherwise make matplotlib refuse the plot), 0 for a NaN bound."""
    below = 0.0 if math.isnan(lo) else max(0.0, y - lo)
    above = 0.0 if math.isnan(hi) else max(0.0, hi - y)
    return [[below], [above]]


Rows = list[dict[str, Any]]


def _by_label(rows: Rows, pts: Rows, drop: Sequence[str]) -> dict[str, Rows]:
    """The rows ``pts`` grouped by legend label (:func:`_short` with ``drop``), in order."""
    out: dict[str, Rows] = {}
    for r in pts:
        out.setdefault(_short(r, rows, drop), []).append(r)
    return out


def config_point(members: Rows) -> tuple[float, float, list[list[float]], str]:
    """One configuration's point of accuracy vs tokens: mean tokens per question and mean
    accuracy over its runs (seeds), the bar as matplotlib's ``yerr``, and what the bar is:
    "t", the 95 % Student-t interval over the seeds (:func:`seed_interval`, clipped to [0, 1])
    from :data:`MIN_SEEDS` seeds; "pooled", the 95 % Wilson interval of the seeds' questions
    pooled, with fewer; "wilson", a single run's own Wilson interval."""
    x = _mean([r["total_per_q"] for r in members])
    if len(members) == 1:
        (r,) = members
        return x, r["accuracy"], _bar(r["accuracy"], r["accuracy_lo"], r["accuracy_hi"]), "wilson"
    y, lo, hi = seed_interval([r["accuracy"] for r in members])
    if len(members) >= MIN_SEEDS and not math.isnan(lo):
        return x, y, _bar(y, max(0.0, lo), min(1.0, hi)), "t"
    n = sum(r["n_questions"] for r in members)
    k = sum(round(r["accuracy"] * r["n_questions"]) for r in members)
    return x, y, _bar(y, *wilson_interval(k, n)), "pooled"


def _tokens_note(kinds: set[str], paper: bool) -> str:
    """What the bars of :func:`plot_accuracy_vs_tokens` are, given the kinds of bar drawn
    (:func:`config_point`)."""
    if kinds <= {"wilson"}:
        return "bars: 95% Wilson" if paper else "bars: 95% Wilson interval of each run"
    parts = []
    if "t" in kinds:
        parts.append(
            f"95% t over ≥{MIN_SEEDS} seeds"
            if paper
            else "95% Student-t interval over the k seeds (mean ± t(k-1)·sd/√k, clipped to [0, 1]) "
            f"where k ≥ {MIN_SEEDS}"
        )
    if "pooled" in kinds:
        parts.append(
            "fewer: 95% Wilson, seeds pooled"
            if paper
            else f"95% Wilson interval of the seeds' questions pooled where 2 ≤ k < {MIN_SEEDS}"
        )
    if "wilson" in kinds:
        parts.append("1 run: its Wilson" if paper else "95% Wilson interval of a single run")
    return "bars: " + (";\n" if paper else "; ").join(parts)  # a line each: fits a column


def plot_accuracy_vs_tokens(rows: list[dict[str, Any]], path: Path, style: FigureStyle = SCREEN) -> list[Path]:
    """Accuracy against total tokens per question, one point per configuration (its runs over
    seeds: mean accuracy at mean tokens, :func:`config_point`, the legend naming the seeds),
    with a 95 % t-interval over seeds from :data:`MIN_SEEDS` seeds, else a Wilson interval
    (seeds pooled); more series than ``style.max_series``: one panel per group of protocols,
    sharing both axes."""
    pts = [r for r in rows if r["n_questions"]]
    styles = _styles(pts)
    groups = _by_label(rows, pts, ("seed",))
    series = {label: members[0]["protocol"] for label, members in groups.items()}
    panels = _panels(series, style.max_series)
    fig, axes = _grid(style, len(panels))
    kinds: set[str] = set()
    for ax, labels in zip(axes, panels):
        for label in labels:
            colour, marker, _ = styles[label]
            members = groups[label]
            x, y, bar, kind = config_point(members)
            kinds.add(kind)
            name = label + (f" ({len(members)} seeds)" if len(members) > 1 else "")
            ax.errorbar([x], [y], yerr=bar, fmt=marker, color=colour, alpha=0.9, label=name)
        _panel_title(ax, labels, series, len(panels) > 1)
        ax.margins(x=0.1)
        ax.grid(alpha=0.3)
    _label_grid(axes, "total tokens per question", "accuracy")
    _fit_y(axes, 0.0, 1.0)
    pooled = ", one point per configuration (mean over seeds)" if len(pts) > len(groups) else ""
    _legend(fig, axes, style, _tokens_note(kinds, True) if style.paper else None)
    short = "" if style.paper else "\n" + _tokens_note(kinds, True).replace("\n", " ")  # paper: the legend
    caption = _title(fig, style, f"Accuracy vs tokens per question{pooled}{short}", rows)
    note = _tokens_note(kinds, False)
    return _save(fig, path, style, f"{caption}. {note[0].upper()}{note[1:]}.")


def pooled_by_round(members: list[dict[str, Any]], key: str) -> tuple[list[float], int]:
    """The per-round list ``key`` of the runs of one configuration over seeds, pooled: round by
    round the question-weighted mean (a shorter list carries its last value), and the number
    of questions pooled (``accuracy_by_round_n`` for accuracy, else ``n_questions``)."""
    weight = "accuracy_by_round_n" if key == "accuracy_by_round" else "n_questions"
    lists = [(r[key], r[weight] or 0) for r in members if r[key]]
    n = sum(w for _, w in lists)
    if not lists or not n:
        return [], 0
    longest = max(len(v) for v, _ in lists)
    return [sum((v[t] if t < len(v) else v[-1]) * w for v, w in lists) / n for t in range(longest)], n


def _round_line(ax, label: str, members: list[dict[str, Any]], key: str, look: tuple[str, str, str], shift: float):
    """One configuration's line of a by-round figure (its seeds pooled), moved right by
    ``shift`` rounds at every point (so it stays level where the data are), with 95 % Wilson
    bars over the pooled questions for accuracy."""
    colour, marker, linestyle = look
    ys, n = pooled_by_round(members, key)
    yerr = None
    if key == "accuracy_by_round":
        bars = [_bar(y, *wilson_interval(round(y * n), n)) for y in ys]
        yerr = [[lo for (lo,), _ in bars], [hi for _, (hi,) in bars]]
    ax.errorbar(
        [t + shift for t in range(len(ys))],
        ys,
        yerr=yerr,
        marker=marker,
        linestyle=linestyle,
        capsize=None if yerr else 0,
        alpha=0.85,
        color=colour,
        label=label + (f" ({len(members)} seeds)" if len(members) > 1 else ""),
    )


def _plot_by_round(
    rows: list[dict[str, Any]], key: str, ylabel: str, title: str, path: Path, style: FigureStyle
) -> list[Path]:
    """One line per configuration (its seeds pooled, :func:`pooled_by_round`) of a per-round
    list column, at most ``style.max_series`` a panel (more: one panel per group of
    protocols, sharing axes); lines with error bars (accuracy) are set apart by 0.06 of a
    round each, the same at every round, so no bar hides another and no line slants."""
    pts = [r for r in rows if r[key]]
    styles = _styles(pts)
    lines = _by_label(rows, pts, ("seed",))
    series = {label: members[0]["protocol"] for label, members in lines.items()}
    panels = _panels(series, style.max_series)
    fig, axes = _grid(style, len(panels))
    for ax, labels in zip(axes, panels):
        for j, label in enumerate(labels):
            dodge = 0.06 * (j - (len(labels) - 1) / 2) if key == "accuracy_by_round" else 0.0
            _round_line(ax, label, lines[label], key, styles[label], dodge)
        _panel_title(ax, labels, series, len(panels) > 1)
        ax.grid(alpha=0.3)
    longest = max((len(r[key]) for r in pts), default=1)
    axes[0].set_xticks(range(longest))
    _label_grid(axes, "round (0 = first answer)", ylabel)
    _fit_y(axes, 0.0, 1.0)
    note = "bars: 95% Wilson, seeds pooled" if key == "accuracy_by_round" and style.paper else None
    _legend(fig, axes, style, note)
    return _save(fig, path, style, _title(fig, style, title, rows))


def plot_consensus(rows: list[dict[str, Any]], path: Path, style: FigureStyle = SCREEN) -> list[Path]:
    """Mean consensus proportion after each round, seeds pooled."""
    title = "Consensus per round, seeds pooled (stopped questions carry their last value)"
    return _plot_by_round(rows, "consensus_by_round", "consensus", title, path, style)


def plot_accuracy_by_round(rows: list[dict[str, Any]], path: Path, style: FigureStyle = SCREEN) -> list[Path]:
    """Accuracy of the vote after each round (the papers' main figure), 95 % Wilson intervals."""
    title = "Accuracy of the vote by round, 95% Wilson intervals, seeds pooled (stopped questions carry)"
    return _plot_by_round(rows, "accuracy_by_round", "accuracy after the round", title, path, style)


# two-sided 95 % quantiles of Student's t for 1..30 degrees of freedom
_T975 = (
    12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
    2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
    2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272,
)  # fmt: skip


def t975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (df >= 1): tabulated to
    30, then the Cornish-Fisher expansion around the normal quantile (error < 1e-4)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = Z95
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def seed_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """Mean of ``values`` (one per seed) and its 95 % Student-t interval,
    mean ± t(0.975, k-1) · sd / sqrt(k) with the sample sd; ``(mean, nan, nan)`` for one value."""
    mean, sd = mean_sd(values)
    k = len(values)
    if k < 2:
        return mean, math.nan, math.nan
    half = t975(k - 1) * sd / math.sqrt(k)
    return mean, mean - half, mean + half


def _vs_points(by_x: dict[Any, list[dict[str, Any]]], key: str) -> tuple[list[float], list[list[float]]]:
    """Per value of the axis: the mean of ``key`` over its seeds, and the Student-t interval's
    distances below and above (clipped to [0, 1] for accuracy, to >= 0 for tokens); NaN, so no
    bar, with fewer than :data:`MIN_SEEDS` seeds."""
    means, below, above = [], [], []
    top = 1.0 if key == "accuracy" else math.inf
    for x in sorted(by_x):
        values = [m[key] for m in by_x[x]]
        mean, lo, hi = seed_interval(values)
        means.append(mean)
        enough = len(values) >= MIN_SEEDS and not math.isnan(lo)
        below.append(max(0.0, mean - max(0.0, lo)) if enough else math.nan)
        above.append(max(0.0, min(top, hi) - mean) if enough else math.nan)
    return means, [below, above]


def _vs_note(series: dict[str, dict[Any, list[dict[str, Any]]]], paper: bool) -> str:
    """What the bars of :func:`plot_vs` are, given how many seeds its points have."""
    seeds = [len(v) for by_x in series.values() for v in by_x.values()]
    if max(seeds, default=1) < MIN_SEEDS:
        return (
            f"means over ≤ {max(seeds, default=1)} seeds: no bars (from {MIN_SEEDS})"
            if paper
            else (
                f"each point: the mean over its {max(seeds, default=1)} seed(s) or fewer; "
                f"no interval (drawn from {MIN_SEEDS} seeds: fewer make a 95% t-interval meaningless)"
            )
        )
    if paper:
        return f"bars: 95% t over ≥{MIN_SEEDS} seeds" + ("" if min(seeds) >= MIN_SEEDS else "; no bar: fewer")
    return (
        f"bars: 95% Student-t interval over the k seeds (mean ± t(k-1)·sd/√k, clipped to [0, 1] and ≥ 0), "
        f"drawn where k ≥ {MIN_SEEDS}" + ("" if min(seeds) >= MIN_SEEDS else f"; no bar: fewer than {MIN_SEEDS} seeds")
    )


def plot_vs(rows: list[dict[str, Any]], axis: str, path: Path, style: FigureStyle = SCREEN) -> list[Path] | str:
    """Accuracy (top) and total tokens per question (bottom) against ``axis`` ("agents" or
    "rounds"): one line per configuration but ``axis`` and ``seed`` (its legend label names the
    other axis, e.g. ``T=3``, and its options), each point the mean over the seeds run at that
    value with its 95 % Student-t interval over the seeds (:func:`seed_interval`) where it has
    at least :data:`MIN_SEEDS`; more lines than ``style.max_series``: a column per group of
    protocols. Returns the files written, or a note instead of drawing when every run has the
    same value of ``axis``."""
    pts = [r for r in rows if r["n_questions"] and r[axis] is not None]
    values = sorted({r[axis] for r in pts})
    if len(values) < 2:
        shown = ", ".join(str(v) for v in values) or "none"
        return f"{path.name} skipped: every configuration has {axis} = {shown}"
    drop = ("seed", axis)
    series: dict[str, dict[Any, list[dict[str, Any]]]] = {}
    for r in pts:
        series.setdefault(_short(r, rows, drop), {}).setdefault(r[axis], []).append(r)
    styles = _styles(pts, drop)
    protocols = {label: next(iter(by_x.values()))[0]["protocol"] for label, by_x in series.items()}
    panels = _panels(protocols, style.max_series)
    fig, axes = _figure(style, 2, len(panels), wide=len(panels) > 1, sharey="row")
    for col, labels in enumerate(panels):
        acc_ax, tok_ax = axes[col], axes[len(panels) + col]
        for j, label in enumerate(labels):
            colour, marker, linestyle = styles[label]
            xs = [x + 0.015 * (j - (len(labels) - 1) / 2) * (values[-1] - values[0]) for x in sorted(series[label])]
            for ax, key in ((acc_ax, "accuracy"), (tok_ax, "total_per_q")):
                means, yerr = _vs_points(series[label], key)
                ax.errorbar(xs, means, yerr=yerr, marker=marker, linestyle=linestyle, color=colour, label=label)
        _panel_title(acc_ax, labels, protocols, len(panels) > 1)
    name = "number of agents N" if axis == "agents" else "rounds T (incl. the first answer)"
    for ax in axes:
        ax.set_xticks(values)
        ax.margins(x=0.08)
        ax.grid(alpha=0.3)
    for ax in axes[len(panels) :]:
        ax.set_xlabel(name)
    axes[0].set_ylabel("accuracy (mean over seeds)")
    axes[len(panels)].set_ylabel("tokens per question")
    _fit_y(axes[: len(panels)], 0.0, 1.0)
    for ax in axes[len(panels) :]:
        ax.set_ylim(bottom=0)
    _legend(fig, axes[: len(panels)], style, _vs_note(series, style.paper))
    caption = _title(fig, style, f"Accuracy and token cost vs {axis}", rows)
    return _save(fig, path, style, f"{caption}. {_vs_note(series, False)}.")


# ----------------------------------------------------------------------------- front door
@dataclass
class Report:
    rows: list[dict[str, Any]]
    out_dir: Path
    files: list[Path]
    notes: list[str]


def build_report(
    path: str | Path,
    out: str | Path | None = None,
    baseline: str = "mad",
    skip_bad_parts: bool = False,
    figures: bool = True,
    style: str = "screen",
) -> Report:
    """Read ``path``, compute the table and write the CSV/JSON and the figures (PNG, PDF, SVG) into
    ``out`` (default path/report). ``skip_bad_parts``: leave unreadable part files out, a note
    naming each (else :class:`ReportError`). ``figures=False``: the tables only (drawing and
    writing the figures is most of a report's time). ``style``: a key of :data:`STYLES`, the
    figures' size and lettering (``paper``: 3.5 / 7.2 in wide at 300 dpi)."""
    if style not in STYLES:
        raise ValueError(f"figure style {style!r}: not one of {', '.join(STYLES)}")
    skipped: list[str] = []
    runs = load_runs(path, skip_bad_parts, skipped)
    rows = summary_rows(runs, baseline)
    notes = [*skipped, *(n for r in runs for n in r.notes)]
    unfinished = [r["label"] for r in rows if r["status"] not in ("finished", None)]
    if unfinished:
        notes.append("not finished (interrupted or still running): " + "; ".join(unfinished))
    notes += _placement_notes(rows)
    errored = [f"{r['label']}: {r['errored_questions']}" for r in rows if r.get("errored_questions")]
    if errored:
        notes.append("questions with failed calls (errored, counted wrong): " + "; ".join(errored))
    if not any(r["protocol"] == baseline for r in rows):
        notes.append(f"no {baseline} run: savings are '-'")
    out_dir = Path(out) if out is not None else Path(path) / "report"
    files = write_summary(rows, out_dir, str(path), baseline)
    if figures:
        files += _figures(rows, out_dir, notes, STYLES[style])
    return Report(rows, out_dir, files, notes)


def _placement_notes(rows: list[dict[str, Any]]) -> list[str]:
    """One note per distinct placement: of every run when all share it, else naming its runs
    (the first and last of more than three)."""
    runs: dict[str, list[str]] = {}
    for r in rows:
        if r.get("placement"):
            runs.setdefault(r["placement"], []).append(r["label"])
    notes = []
    for placement, labels in runs.items():
        if len(labels) == len(rows) > 1:
            who = f"every run ({len(labels)})"
        elif len(labels) > 3:
            who = f"{len(labels)} runs ({labels[0]} ... {labels[-1]})"
        else:
            who = "; ".join(labels)
        notes.append(f"placement of {who}: {placement}")
    return notes


def _figures(rows: list[dict[str, Any]], out_dir: Path, notes: list[str], style: FigureStyle = SCREEN) -> list[Path]:
    """Draw and write every figure of the report in ``style``; a figure that cannot be drawn is
    a note."""
    # function-level: importing matplotlib here keeps it off start-up
    from matplotlib import rc_context

    with rc_context(_rc(style)):  # the style's point sizes for everything drawn
        files = plot_accuracy_vs_tokens(rows, out_dir / "accuracy_vs_tokens.png", style)
        files += plot_consensus(rows, out_dir / "consensus_per_round.png", style)
        files += plot_accuracy_by_round(rows, out_dir / "accuracy_by_round.png", style)
        for axis in ("agents", "rounds"):
            target = out_dir / f"accuracy_tokens_vs_{axis}.png"
            drawn = plot_vs(rows, axis, target, style)
            if isinstance(drawn, str):
                notes.append(drawn)
                for stale in figure_paths(target):  # from an earlier report of different data
                    stale.unlink(missing_ok=True)
            else:
                files += drawn
    if not style.paper:  # captions of an earlier paper-style report would describe other figures
        for png in PLOTS:
            (out_dir / png).with_suffix(".caption.txt").unlink(missing_ok=True)
    return files
