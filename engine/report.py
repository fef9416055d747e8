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
* mean effective debate rounds (rounds until all agents first agree, per question);
* mean consensus proportion per round (:func:`consensus_curve`): a question that stopped early
  carries its last value forward to the longest question of the run (and to the configured
  number of rounds), as :func:`engine.accounting.summarize` does for the runs table.

Outputs (``REPORT_DIR``, default ``DIR/report``): ``summary.csv``, ``summary.json``,
``accuracy_vs_tokens.png``, ``consensus_per_round.png``, ``tokens_vs_agents.png`` and
``tokens_vs_rounds.png`` (the last two are skipped, with a note, when every configuration has
the same number of agents / rounds). Simulated-backend data are labelled in every plot title.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.accounting import carried_mean, mean_sd, seed_groups, summarize
from engine.config import UNHASHED
from engine.formatting import fmt_num
from engine.metrics import METRICS
from engine.protocols import SPECS
from engine.results import ResultsError, complete_calls, find_run_dirs, read_table

Z95 = 1.959963984540054  # two-sided 95 % normal quantile
PLOTS = (
    "accuracy_vs_tokens.png",
    "consensus_per_round.png",
    "accuracy_by_round.png",
    "tokens_vs_agents.png",
    "tokens_vs_rounds.png",
)
# Config keys that never change results (RunConfig.run_id leaves them out): no run label names them.
_NOT_RESULT_KEYS = frozenset(UNHASHED)
_CALL_COLUMNS = ("run_id", "question_id", "attempt", "agent_id", "prompt_tokens", "completion_tokens")
_QUESTION_COLUMNS = (
    "run_id",
    "question_id",
    "attempt",
    "protocol",
    "n_agents",
    "rounds_run",
    *(m.name for m in METRICS if m.report),  # engine/metrics.py
    "backend",
    "simulated",
)


# Bad input to ``debate report`` (missing directory, no results); the message names the path.
ReportError = ResultsError


# ----------------------------------------------------------------------------- statistics
def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials (95 % by default).

    centre = (p + z^2/(2n)) / (1 + z^2/n),  half = z / (1 + z^2/n) * sqrt(p(1-p)/n + z^2/(4n^2)),
    with p = k/n. ``(nan, nan)`` when n = 0.
    """
    if n <= 0:
        return (math.nan, math.nan)
    p = k / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return (max(0.0, centre - half), min(1.0, centre + half))


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
def _read(run_dir: Path, table: str, columns: Sequence[str] | None = None) -> pa.Table:
    """One table of a run directory, projected to ``columns`` (:func:`engine.results.read_table`:
    missing newer columns read as null, re-graded question rows replace the run's)."""
    return read_table(run_dir, table, list(columns) if columns else None)


@dataclass
class RunData:
    """One configuration: a run_id in one run directory."""

    run_dir: Path
    run_id: str
    run: dict[str, Any]  # the runs-table row ({} when the run has question rows but no run row)
    config: dict[str, Any]
    questions: list[dict[str, Any]]
    calls: dict[str, int] | None  # totals over complete calls; None when the run has no call rows
    notes: list[str] = field(default_factory=list)


def _call_totals(calls: pa.Table) -> dict[str, dict[str, int]]:
    if not calls.num_rows:
        return {}
    summary = pc.equal(calls.column("agent_id"), -1)
    t = calls.select(["run_id", "prompt_tokens", "completion_tokens"]).append_column(
        "summary", pc.cast(pc.fill_null(summary, False), pa.int64())
    )
    agg = t.group_by("run_id").aggregate(
        [("prompt_tokens", "sum"), ("completion_tokens", "sum"), ("summary", "sum"), ("run_id", "count")]
    )
    return {
        r["run_id"]: {
            "prompt_tokens": r["prompt_tokens_sum"] or 0,
            "completion_tokens": r["completion_tokens_sum"] or 0,
            "calls": r["run_id_count"],
            "summary_calls": r["summary_sum"] or 0,
        }
        for r in agg.to_pylist()
    }


def load_runs(path: str | Path) -> list[RunData]:
    """Read every configuration under ``path`` (see the module docstring)."""
    run_dirs = find_run_dirs(path)
    if not run_dirs:
        raise ReportError(f"{path}: no results (no folder with a runs/ sub-folder)")
    out: list[RunData] = []
    for d in run_dirs:
        runs = {r["run_id"]: r for r in _read(d, "runs").to_pylist()}
        qtab = _read(d, "questions", _QUESTION_COLUMNS)
        ctab = complete_calls(_read(d, "calls", _CALL_COLUMNS), qtab)
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
            data = RunData(
                d, run_id, run, config if isinstance(config, dict) else {}, by_run.get(run_id, []), totals.get(run_id)
            )
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
        from types import SimpleNamespace

        agents, rounds = SPECS[protocol].shape(SimpleNamespace(**{**cfg, "agents": agents, "rounds": rounds}))
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
    else:
        prompt, completion = run["prompt_tokens"], run["completion_tokens"]
        calls, summary_calls = run["n_calls"], run["n_summary_calls"]
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
        "models": _models_of(cfg),
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
        "placement": placement_text(data.run.get("placement")),
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
        for m in METRICS
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


def placement_text(placement_json: str | None) -> str:
    """One line from a runs row's ``placement`` JSON: where each replica (model#index), the
    embedder, writer and coordinator ran -- node IP and GPU ids; a tensor-parallel replica's
    bundles are counted per node. "" for runs recorded without it."""
    if not placement_json:
        return ""
    try:
        entries = json.loads(placement_json)
    except ValueError:
        return "(unreadable)"
    parts = []
    for e in entries:
        name = f"{e.get('model')}#{e.get('replica')}" if e.get("role") == "replica" else str(e.get("role"))
        where = str(e.get("node_ip") or (e.get("node_id") or "?")[:8])
        if e.get("gpu_ids"):
            where += f" GPU {','.join(map(str, e['gpu_ids']))}"
        if e.get("bundle_nodes"):
            nodes = e["bundle_nodes"]
            where += f" ({len(nodes)} bundles on {len(set(nodes))} node{'s' if len(set(nodes)) > 1 else ''})"
        if e.get("device"):
            where += f" {e['device']}"
        parts.append(f"{name} @ {where}")
    return "; ".join(parts)


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


def _models_of(cfg: dict[str, Any]) -> str:
    """The models a run used, as one comparable string (per-agent settings included)."""
    per_agent = [a.get("model") for a in cfg.get("agent_settings") or [] if isinstance(a, dict)]
    return json.dumps([cfg.get("models") or cfg.get("model"), per_agent], default=str)


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
    """The summary table: one dict per configuration, sorted by protocol, agents, rounds, label."""
    rows = [summarize_run(r) for r in runs]
    for row, label in zip(rows, _labels(runs)):
        row["label"] = label
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
)


def render_table(rows: list[dict[str, Any]], baseline: str = "mad"):
    """A rich Table of the summary rows."""
    from rich.table import Table

    table = Table(
        title="debate report" + _sim_title(rows),
        caption=f"savings = 1 - tok/q / the {baseline} run's, total and input (prompt) tokens, against a "
        f"{baseline} run with the same agents, rounds, dataset, backend, models and seed; - = none",
    )
    for i, c in enumerate(COLUMNS):
        table.add_column(c.format(baseline=baseline), justify="left" if i in (0, 13) else "right", overflow="fold")
    for r in rows:
        table.add_row(*format_row(r))
    return table


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
def _figure(width: float = 8.0, height: float = 5.5):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure  # rendered with the Agg canvas; pyplot is never imported

    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)  # a renderer to measure labels with (_annotate)
    return fig, fig.add_subplot(1, 1, 1)


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


def _short(row: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """Point/line label: without '(SIMULATED)' when the title says so, with '*' when mixed."""
    lab = row["label"].replace(" (SIMULATED)", "")
    mixed = 0 < sum(bool(r["simulated"]) for r in rows) < len(rows)
    return lab + (" *" if mixed and row["simulated"] else "")


def _colors(protocols: Iterable[str]) -> dict[str, Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {p: cmap(i % 10) for i, p in enumerate(dict.fromkeys(protocols))}


def _annotate(ax, items: list[tuple[float, float, str]], dx: float = 6, dy: float = 6, fontsize: int = 8) -> list:
    """Text next to points, no two overlapping: each label is measured as drawn (its real box)
    and moved down a line at a time until it overlaps no label placed before it. Call it last,
    after the title, legend and limits: it lays the figure out first (``tight_layout``), so the
    boxes it checks are the saved ones. Returns the labels (Text objects)."""
    fig = ax.figure
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    placed: list[Any] = []  # the boxes (Bbox) of the labels placed so far
    texts: list[Any] = []
    line = fontsize * 1.4  # points
    for x, y, text in sorted(items, key=lambda it: (-it[1], it[0])):
        off = dy
        for _ in range(200):
            label = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, off), fontsize=fontsize)
            box = label.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in placed):
                break
            label.remove()
            off -= line
        placed.append(box)
        texts.append(label)
    return texts


def plot_accuracy_vs_tokens(rows: list[dict[str, Any]], path: Path) -> None:
    fig, ax = _figure()
    pts = [r for r in rows if r["n_questions"]]
    colors = _colors(r["protocol"] for r in pts)
    seen: set[str] = set()
    for r in pts:
        x, y = r["total_per_q"], r["accuracy"]
        err = [[y - r["accuracy_lo"]], [r["accuracy_hi"] - y]]
        ax.errorbar(
            [x],
            [y],
            yerr=err,
            fmt="o",
            color=colors[r["protocol"]],
            capsize=3,
            markersize=7,
            label=None if r["protocol"] in seen else r["protocol"],
        )
        seen.add(r["protocol"])
    ax.set_xlabel("total tokens per question (prompt + completion)")
    ax.set_ylabel("accuracy (95% Wilson interval)")
    ax.set_ylim(-0.02, 1.05)
    xs = [r["total_per_q"] for r in pts]
    if xs:
        lo, hi = min(xs), max(xs)
        pad = (hi - lo) * 0.15 or max(hi * 0.1, 1.0)
        ax.set_xlim(max(0.0, lo - pad), hi + 2 * pad)
    ax.grid(alpha=0.3)
    if pts:
        ax.legend(loc="lower right", fontsize=8)
    ax.set_title("Accuracy vs token cost" + _sim_suffix(rows))
    _annotate(ax, [(r["total_per_q"], r["accuracy"], _short(r, rows)) for r in pts])
    fig.savefig(path)


def plot_consensus(rows: list[dict[str, Any]], path: Path) -> None:
    fig, ax = _figure()
    pts = [r for r in rows if r["consensus_by_round"]]
    colors = _colors(r["protocol"] for r in pts)
    styles = ["-", "--", ":", "-."]
    count: dict[str, int] = {}
    for r in pts:
        i = count.get(r["protocol"], 0)
        count[r["protocol"]] = i + 1
        ys = r["consensus_by_round"]
        ax.plot(
            range(1, len(ys) + 1),
            ys,
            marker="osD^v"[i % 5],
            markersize=7 - i % 5,
            alpha=0.85,
            linestyle=styles[i % len(styles)],
            color=colors[r["protocol"]],
            label=_short(r, rows),
        )
    _finish_by_round(
        fig,
        ax,
        pts,
        "consensus_by_round",
        "mean consensus proportion",
        (0, 1.05),
        "Consensus per round (stopped questions carry their last value)" + _sim_suffix(rows),
        path,
    )


def _finish_by_round(fig, ax, pts, key: str, ylabel: str, ylim: tuple[float, float], title: str, path: Path) -> None:
    """Axes, legend and title of a per-round plot, then save it."""
    longest = max((len(r[key]) for r in pts), default=1)
    ax.set_xticks(range(1, longest + 1))
    ax.set_xlabel("round (1 = first answer)")
    ax.set_ylabel(ylabel)
    ax.set_ylim(*ylim)
    ax.grid(alpha=0.3)
    if pts:
        ax.legend(fontsize=8, loc="best")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)


def plot_accuracy_by_round(rows: list[dict[str, Any]], path: Path) -> None:
    """Accuracy of the vote after each round (the papers' main figure), 95 % Wilson intervals."""
    fig, ax = _figure()
    pts = [r for r in rows if r["accuracy_by_round"]]
    colors = _colors(r["protocol"] for r in pts)
    count: dict[str, int] = {}
    for r in pts:
        i = count.get(r["protocol"], 0)
        count[r["protocol"]] = i + 1
        ys, n = r["accuracy_by_round"], r["accuracy_by_round_n"]
        xs = [t + 1 + 0.06 * (i - 1) for t in range(len(ys))]  # small offsets keep error bars apart
        ks = [round(y * n) for y in ys]
        lo = [y - wilson_interval(k, n)[0] for y, k in zip(ys, ks)]
        hi = [wilson_interval(k, n)[1] - y for y, k in zip(ys, ks)]
        ax.errorbar(
            xs,
            ys,
            yerr=[lo, hi],
            marker="osD^v"[i % 5],
            capsize=3,
            alpha=0.85,
            color=colors[r["protocol"]],
            label=_short(r, rows),
        )
    _finish_by_round(
        fig,
        ax,
        pts,
        "accuracy_by_round",
        "accuracy of the vote after the round",
        (-0.02, 1.02),
        "Accuracy by round, 95% Wilson intervals (stopped questions carry)" + _sim_suffix(rows),
        path,
    )


def plot_tokens_vs(rows: list[dict[str, Any]], axis: str, path: Path) -> str | None:
    """Total tokens per question vs ``axis`` ("agents" or "rounds"), one line per protocol (and
    per value of the other axis when it varies). Several runs at one x (e.g. two densities)
    are averaged on the line and each keeps its own marker, labelled with its density/groups.
    Returns a note instead of drawing when the data has a single value of ``axis``."""
    other = "rounds" if axis == "agents" else "agents"
    pts = [r for r in rows if r["n_questions"] and r[axis] is not None]
    values = sorted({r[axis] for r in pts})
    if len(values) < 2:
        shown = ", ".join(str(v) for v in values) or "none"
        return f"{path.name} skipped: every configuration has {axis} = {shown}"
    others = {r[other] for r in pts}
    series: dict[tuple[str, Any], list[dict[str, Any]]] = {}
    for r in pts:
        series.setdefault((r["protocol"], r[other] if len(others) > 1 else None), []).append(r)
    colors = _colors(r["protocol"] for r in pts)
    styles = {v: s for v, s in zip(sorted(others, key=lambda v: (v is None, v)), ["-", "--", ":", "-."] * 10)}
    fig, ax = _figure()
    tags = []
    for (protocol, ov), members in series.items():
        xs = sorted({m[axis] for m in members})
        ys = [_mean([m["total_per_q"] for m in members if m[axis] == x]) for x in xs]
        label = protocol + ("" if ov is None else f" ({'T' if other == 'rounds' else 'N'}={ov})")
        ax.plot(
            xs,
            ys,
            linestyle=styles.get(ov, "-") if ov is not None else "-",
            color=colors[protocol],
            marker="o",
            label=label,
        )
        for m in members:
            ax.plot([m[axis]], [m["total_per_q"]], "o", color=colors[protocol])
            tag = " ".join(p for p in m["label"].replace(" (SIMULATED)", "").split()[2:] if p.startswith(("D=", "G=")))
            if tag:
                tags.append((m[axis], m["total_per_q"], tag))
    ax.set_xticks(values)
    ax.margins(x=0.1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("number of agents N" if axis == "agents" else "rounds T (including the first answer)")
    ax.set_ylabel("total tokens per question")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"Token cost vs {'agents' if axis == 'agents' else 'rounds'}" + _sim_suffix(rows))
    _annotate(ax, tags, dy=-10)
    fig.savefig(path)
    return None


# ----------------------------------------------------------------------------- front door
@dataclass
class Report:
    rows: list[dict[str, Any]]
    out_dir: Path
    files: list[Path]
    notes: list[str]


def build_report(path: str | Path, out: str | Path | None = None, baseline: str = "mad") -> Report:
    """Read ``path``, compute the table and write the CSV/JSON/PNGs into ``out`` (default path/report)."""
    runs = load_runs(path)
    rows = summary_rows(runs, baseline)
    notes = [n for r in runs for n in r.notes]
    unfinished = [r["label"] for r in rows if r["status"] not in ("finished", None)]
    if unfinished:
        notes.append("not finished (interrupted or still running): " + "; ".join(unfinished))
    for r in rows:
        if r.get("placement"):
            notes.append(f"placement of {r['label']}: {r['placement']}")
    errored = [f"{r['label']}: {r['errored_questions']}" for r in rows if r.get("errored_questions")]
    if errored:
        notes.append("questions with failed calls (errored, counted wrong): " + "; ".join(errored))
    if not any(r["protocol"] == baseline for r in rows):
        notes.append(f"no {baseline} run: savings are '-'")
    out_dir = Path(out) if out is not None else Path(path) / "report"
    files = write_summary(rows, out_dir, str(path), baseline)
    plot_accuracy_vs_tokens(rows, out_dir / "accuracy_vs_tokens.png")
    plot_consensus(rows, out_dir / "consensus_per_round.png")
    plot_accuracy_by_round(rows, out_dir / "accuracy_by_round.png")
    files += [
        out_dir / "accuracy_vs_tokens.png",
        out_dir / "consensus_per_round.png",
        out_dir / "accuracy_by_round.png",
    ]
    for axis in ("agents", "rounds"):
        target = out_dir / f"tokens_vs_{axis}.png"
        note = plot_tokens_vs(rows, axis, target)
        if note:
            notes.append(note)
            if target.exists():  # a stale plot from an earlier report of different data
                target.unlink()
        else:
            files.append(target)
    return Report(rows, out_dir, files, notes)
