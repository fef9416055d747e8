"""Re-run the seed papers' tables with the papers' own settings and print them beside the
published numbers.

    .venv/bin/python scripts/reproduce_seeds.py --paper {sparse,group,s2mad,cortex,all}
        [--backend auto|vllm|transformers|openai|simulated] [--api-base URL] [--config YAML]
        [--dataset PATH|hf:NAME] [--limit N] [--seeds K] [--tables "Table 1,Table 4"] [--out DIR] [--list]

What a paper's tables are (methods, settings, published values, and where each number is printed
in the paper: table, row, column) is data: ``scripts/paper_tables/<paper>.json``, read from the
papers' text. A row whose method the engine cannot express yet says why (``unmappable``) and is
listed, not run.

Your models and data. ``--config YAML`` holds ``debate run`` options applied to every run (model,
backend, max_tokens, placement_resources, ...) and two maps:

    models_map:   {"GPT-3.5-turbo-0125": my-org/my-7b, "GPT-4-0613": my-org/my-70b}
    datasets:     {GSM8K: ../shared/data/gsm8k_test.jsonl, MATH: "hf:HuggingFaceH4/MATH-500", MMLU: ...}

A table row runs on your model for its paper model (``models_map``; unmapped: your ``model``) and
on your file for its dataset (``datasets``; ``--dataset`` runs every table on one dataset). A
table whose dataset has no mapping is skipped with a note.

Seeds. Each row runs ``--seeds`` times (default: the paper's number of repeats, at least 2, so
a mean ± sd exists; ``--seeds 1`` runs each row once and prints no spread); the sparse paper's
rows keep the first answers fixed across seeds (``first_round_seed``), its protocol for the ±
columns. Every row is a sweep
(``OUT/<paper>/<table>/<row>.yaml``: its options plus ``grid: {seed: [...]}``), run on one DebateRunner
(the model loads once; rounds 0 are shared where they can be) and resumable: re-run the command.

Each row is run as its paper ran it: the paper's prompts (``prompts`` at the top of its JSON:
system prompt, output limits, stage texts, per task; a row may add its own, e.g. CortexDebate's
baselines) unless ``--no-paper-prompts``, and its options. An option the row's protocol does not
read is an error in the table (it would silently not apply).

Output per table: method | published values (never cut: long lists wrap under their column) |
ours: the row's own metrics under the published names (``measure`` in the table's or row's JSON: final
accuracy, accuracy averaged over rounds, accuracy or unanimity after round N, tokens per question,
prompt tokens per call), mean ± sd over the seeds (± variance where the paper prints one) |
tokens per question | total and input-token saving vs the MAD row of its block (the same model
and data set run) | the paper's own total-token saving of the row vs its block's MAD row, from
the published token counts ("paper") | source of the published numbers. A row's notes (e.g.
every agent on one model because ``models_map`` does not map every backbone, or a table's model
blocks that all run your one model and so repeat one another) are printed under it. And
``OUT/<paper>/reproduce.json``. With ``--dataset`` a method that a table repeats per dataset
column is one run: it is run and printed once, with every column's published values named by
their dataset.

On a GPU cluster: put ``ray_address: auto`` and your models' ``placement_resources`` in the YAML
(see cluster.yaml and the README's Cluster section), e.g.

    .venv/bin/python scripts/reproduce_seeds.py --paper all --config my-models.yaml --out runs/papers
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from engine.accounting import mean_sd  # noqa: E402
from engine.inputs import load_yaml  # noqa: E402
from engine.options import ConfigError  # noqa: E402

TABLES_DIR = Path(__file__).resolve().parent / "paper_tables"
PAPERS = ("sparse", "group", "s2mad", "cortex")


def load_paper(name: str) -> dict[str, Any]:
    path = TABLES_DIR / f"{name}.json"
    if not path.is_file():
        raise SystemExit(f"reproduce_seeds: {path} is missing (the paper's tables)")
    return json.loads(path.read_text())


def slug(text: str) -> str:
    """A file name for ``text``: readable, cut at 60 characters, made unique by a short hash."""
    digest = hashlib.sha1(text.encode()).hexdigest()[:6]
    return (re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:60] or "row") + f"-{digest}"


def default_seeds(paper: dict[str, Any]) -> int:
    found = re.search(r"\d+", str(paper.get("settings", {}).get("seeds_or_repeats", "")))
    return max(2, min(int(found.group()), 5)) if found else 3


def plan_rows(paper_name: str, paper: dict[str, Any], user: dict[str, Any], args) -> list[dict[str, Any]]:
    """Every table row as a plan: what to run (options) or why not (skip)."""
    paper_prompts = not getattr(args, "no_paper_prompts", False)
    models_map = user.get("models_map") or {}
    datasets = user.get("datasets") or {}
    wanted = {t.strip() for t in (args.tables or "").split(",") if t.strip()}
    plans = []
    for table in paper.get("tables", []):
        if wanted and table["id"] not in wanted:
            continue
        blocks = {str(r.get("model") or table.get("model")) for r in table.get("rows", [])}
        for row in table.get("rows", []):
            engine = dict(row.get("engine") or {})
            dataset_name = row.get("dataset") or table.get("dataset")
            plan = {
                "paper": paper_name,
                "table": table["id"],
                "title": table.get("title", ""),
                "method": row["method"],
                "published": row.get("values", {}),
                "source": row.get("source", ""),
                "dataset_name": dataset_name,
                "paper_model": row.get("model") or table.get("model"),
                "skip": None,
                "notes": [],
            }
            plan["table_note"] = table.get("engine_notes")
            # what the paper prints, ours beside it; a figure without printed numbers: all its measures
            plan["measure"] = {
                k: v
                for k, v in {**table.get("measure", {}), **row.get("measure", {})}.items()
                if k in plan["published"] or table.get("no_published_numbers")
            }
            plan["spread"] = row.get("spread") or table.get("spread", "sd")
            for metric in plan["measure"].values():
                check_measure(metric)
            if engine.get("unmappable") or not engine.get("protocol"):
                plan["skip"] = engine.get("unmappable") or "no engine mapping"
                plans.append(plan)
                continue
            dataset = args.dataset or datasets.get(dataset_name)
            if not dataset:
                plan["skip"] = f"no dataset for {dataset_name!r} (datasets: in --config, or --dataset)"
                plans.append(plan)
                continue
            # run options (a key that is none is reported by the run's config check); a row's list of
            # "models" (one per agent, e.g. CortexDebate's five backbones) runs only when models_map maps
            # every one of them, else every agent runs the one model (the row's "model" or yours)
            opts = {k: v for k, v in engine.items() if not (k == "models" and not isinstance(v, str))}
            if isinstance(engine.get("models"), list) and len(set(map(str, engine["models"]))) > 1:
                paper_models = [str(m) for m in engine["models"]]
                if all(m in models_map for m in paper_models):
                    opts["models"] = ",".join(str(models_map[m]) for m in paper_models)
                else:
                    plan["notes"].append(
                        f"every agent on one model, not the paper's {len(paper_models)} backbones: map all of "
                        f"{', '.join(paper_models)} in models_map for the paper's mix"
                    )
            base = {k: v for k, v in user.items() if k not in ("models_map", "datasets")}
            opts = {
                **base,
                **opts,
                "dataset": dataset,
                "backend": args.backend or base.get("backend", "auto"),
                "limit": args.limit,
                "reuse_first_round": True,
                "progress": False,
            }
            if args.api_base:
                opts["api_base"] = args.api_base
            if plan["paper_model"] in models_map:
                opts["model"] = models_map[plan["paper_model"]]
            elif len(blocks) > 1:
                plan["notes"].append(_unmapped_block_note(plan["paper_model"], len(blocks), opts))
            if isinstance(opts.get("models"), str) and models_map:  # "strong*1,weak*5": map each name
                opts["models"] = ",".join(
                    f"{models_map.get(m.split('*')[0], m.split('*')[0])}" + (f"*{m.split('*')[1]}" if "*" in m else "")
                    for m in opts["models"].split(",")
                )
            if paper_name == "sparse":  # the sparse paper's ± columns: first answers fixed, later rounds resampled
                opts.setdefault("first_round_seed", 0)
            if paper_prompts:
                opts["prompts"] = merge_prompts(paper.get("prompts") or {}, engine.get("prompts") or {})
            check_read(paper_name, table["id"], row["method"], engine, opts)
            if opts["protocol"] == "reconcile" and not opts.get("reconcile_samples"):
                plan["notes"].append(
                    "run without RECONCILE's convincing samples (the paper's prompt shows them): give "
                    "reconcile_samples in --config"
                )
            plan["options"] = opts
            plans.append(plan)
    return merge_same_runs(plans) if args.dataset else plans


def _unmapped_block_note(paper_model: Any, n_blocks: int, opts: dict[str, Any]) -> str:
    """The note of a row whose paper model has no ``models_map`` entry, in a table of several model
    blocks: the blocks differ by a model name only (or all run the engine's default model), so on
    the simulated backend they repeat one another's numbers, and a real backend needs the map."""
    ran = str(opts.get("models") or opts.get("model") or "")
    if ran and str(paper_model) in ran:
        return (
            f"no models_map entry for the paper's {paper_model}: the run only names it ({ran}), so the {n_blocks} "
            f"model blocks of this table repeat one another's numbers on the simulated backend, and a real backend "
            f"needs it mapped to a model (models_map)"
        )
    return (
        f"the paper's {paper_model}, run as {ran or 'the engine default model'}: all {n_blocks} model blocks of "
        f"this table run it, so they repeat one another (map the paper's models in models_map to tell them apart)"
    )


def merge_prompts(paper: dict[str, Any], row: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The paper's prompt overrides with a row's own on top, stage by stage within each task scope."""
    out = {scope: dict(stages) for scope, stages in paper.items() if not scope.startswith("_")}
    for scope, stages in row.items():
        out.setdefault(scope, {}).update(stages)
    return out


class TableError(SystemExit):
    """A paper table that cannot be what its paper ran (e.g. an option its protocol ignores)."""


def check_read(paper: str, table: str, method: str, engine: dict[str, Any], opts: dict[str, Any]) -> None:
    """Every option a row sets must be one its run reads (CortexDebate reads ``cortex_memory``, not
    ``memory``; CoT uses one agent): else the row would run without it, silently. What a run reads
    is :func:`app.sweep.unread_given`'s, the check behind ``debate run``'s warnings."""
    from app.sweep import unread_given
    from engine.config import config_from_mapping

    source = f"scripts/paper_tables/{paper}.json {table}, row {method!r}"
    cfg = config_from_mapping({k: v for k, v in opts.items() if k != "backend"}, source=source)
    unread = unread_given(cfg, engine)
    if unread:
        raise TableError(f"reproduce_seeds: {source}: " + "; ".join(unread))


def merge_same_runs(plans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """With ``--dataset`` a table's rows that repeat one method per dataset column (and per model
    block, when no ``models_map`` tells the models apart) run the same options (one run id): keep
    the first as one row whose published values are every column's, each named by its dataset
    and, where the blocks differ, its paper model (``GSM8K: accuracy_pct=...``,
    ``GSM8K / GPT-4: ...``), so a run is run and printed once."""
    kept: dict[tuple[str, str], dict[str, Any]] = {}
    out = []
    for plan in plans:
        if plan["skip"]:
            out.append(plan)
            continue
        key = (plan["table"], json.dumps(plan["options"], sort_keys=True, default=str))
        first = kept.get(key)
        if first is None:
            kept[key] = plan
            plan["columns"] = [(plan["dataset_name"], plan["paper_model"], plan["published"])]
            out.append(plan)
            continue
        first["columns"].append((plan["dataset_name"], plan["paper_model"], plan["published"]))
        first["measure"] = {**plan.get("measure", {}), **first.get("measure", {})}
        first["source"] += "; " + plan["source"]
    for plan in kept.values():
        columns = plan["columns"]
        if len(columns) > 1:
            with_model = len({m for _, m, _ in columns}) > 1
            plan["published"] = {
                f"{name} / {model}: {k}" if with_model else f"{name}: {k}": v
                for name, model, values in columns
                for k, v in values.items()
            }
        plan["columns"] = [name for name, _, _ in columns]
    return out


# the metrics a table's ``measure`` may name (a published key -> one of these), read from a run's rows
MEASURES = {
    "accuracy": "final-vote accuracy (%)",
    "accuracy_avg_over_rounds": "the vote's accuracy after each round, averaged over all rounds (first answers too; %)",
    "accuracy@N": "the vote's accuracy after round N (%; round 0 = the first answers)",
    "unanimous@N": "questions on which every agent gives the same valid answer after round N (%)",
    "tokens_k": "prompt + completion tokens per question, in thousands",
    "prompt_tokens_per_call": "prompt tokens of one call (one agent's input context), mean over the calls",
}
NOT_MEASURED = "not measured:"  # a measure naming why the engine has no such number (e.g. a chess engine's score)


def check_measure(name: str) -> None:
    """A ``measure`` value must be a known metric (or say why it is not measured)."""
    if name.startswith(NOT_MEASURED) or name in MEASURES or re.sub(r"@\d+$", "@N", name) in MEASURES:
        return
    raise TableError(f"reproduce_seeds: measure {name!r} is not one of {', '.join(MEASURES)} (or '{NOT_MEASURED} ...')")


def _carried(lists: Any, n: int) -> np.ndarray:
    """Per-round lists (a question that stopped early has fewer) as an (questions x n) array, each
    carried forward from its last round, as the run's by-round aggregates are."""
    rows = []
    for values in lists:
        values = [] if values is None else [np.nan if v is None else float(v) for v in values]
        values = values[:n] + [values[-1] if values else np.nan] * max(0, n - len(values))
        rows.append(values)
    return np.array(rows, dtype=float).reshape(len(rows), n)


def measure_run(name: str, questions: Any, calls: Any, rounds: int) -> float:
    """One run's value of metric ``name`` (:data:`MEASURES`) from its question and call rows."""
    if name == "accuracy":
        return 100 * float(questions["correct"].fillna(False).astype(bool).mean())
    if name == "tokens_k":
        return float((questions["prompt_tokens"] + questions["completion_tokens"]).sum()) / len(questions) / 1000
    if name == "prompt_tokens_per_call":
        ok = calls[calls["error"].isna()] if "error" in calls else calls
        return float(ok["prompt_tokens"].mean())
    correct = np.nan_to_num(_carried(questions["correct_by_round"], rounds), nan=0.0)
    if name == "accuracy_avg_over_rounds":
        return 100 * float(correct.mean())
    which, _, n = name.partition("@")
    at = int(n)
    if at >= rounds:
        return float("nan")
    if which == "accuracy":
        return 100 * float(correct[:, at].mean())
    consensus = np.nan_to_num(_carried(questions["consensus"], rounds), nan=0.0)
    return 100 * float((consensus[:, at] >= 1 - 1e-9).mean())


def _ran(plan: dict[str, Any]) -> list[str]:
    """What a row ran, for its file names: the method, the data set run (its file's stem) and the
    model(s) run, so a row run on another data set than its table's is not named after the table's."""
    opts = plan["options"]
    dataset = str(opts["dataset"])
    ran = [plan["method"], Path(dataset).stem if not dataset.startswith("hf:") else dataset]
    model = opts.get("models") or opts.get("model")
    return ran + ([str(model)] if model else [])


def run_plan(plan: dict[str, Any], seeds: list[int], out: Path, runner) -> dict[str, Any]:
    """One row: its sweep file (options + grid over seeds), run on the shared DebateRunner; its
    metrics (``measure``) read from the runs' rows, mean and spread over the seeds."""
    from app.sweep import parse_sweep, run_sweep
    from engine.results import load

    folder = out / plan["paper"] / slug(plan["table"])
    folder.mkdir(parents=True, exist_ok=True)
    data = {**plan["options"], "grid": {"seed": seeds}}
    # one file per row: a table repeats a method per dataset column and per model block
    name = slug(" ".join(_ran(plan)))
    sweep_file = folder / f"{name}.yaml"
    sweep_file.write_text(yaml.safe_dump(data, sort_keys=False))
    cells = run_sweep(
        parse_sweep(data, str(sweep_file)), folder / name, runner=runner, echo=lambda line: None, progress=False
    )
    done = [c for c in cells if c.status == "finished"]
    acc = mean_sd([c.result["accuracy"] for c in done])
    tok = mean_sd([c.result["tokens"] / max(1, c.result["n_questions"]) for c in done])
    prompt = mean_sd([c.result["prompt_tokens"] / max(1, c.result["n_questions"]) for c in done])
    measures: dict[str, dict[str, Any]] = {}
    if done and plan.get("measure"):
        res = load(folder / name)
        per_run = [
            (res.questions[res.questions["run_id"] == c.run_id], res.calls[res.calls["run_id"] == c.run_id], c)
            for c in done
        ]
        for key, metric in plan["measure"].items():
            if metric.startswith(NOT_MEASURED):
                measures[key] = {"metric": metric}
                continue
            values = [measure_run(metric, q, k, c.config.experiment.rounds) for q, k, c in per_run]
            mean, sd = mean_sd(values)
            measures[key] = {"metric": metric, "mean": mean, "sd": sd, "values": values}
    return {
        "sweep": str(sweep_file),
        "runs": [c.run_id for c in done],
        "seeds": len(done),
        "accuracy_mean": acc[0],
        "accuracy_sd": acc[1],
        "tokens_per_q": tok[0],
        "tokens_per_q_sd": tok[1],
        "prompt_per_q": prompt[0],
        "measures": measures,
        "errors": [c.error for c in cells if c.error],
    }


def fmt(x: float, spec: str) -> str:
    return "-" if x is None or x != x else format(x, spec)


def published_parts(values: dict[str, Any]) -> list[str]:
    """``key=value`` (``±sd`` when the paper gives one under ``key_sd``) per published value."""
    parts = []
    for key, value in values.items():
        if key.endswith("_sd"):
            continue
        sd = values.get(f"{key}_sd")
        parts.append(f"{key}={value}" + (f"±{sd}" if sd is not None else ""))
    return parts or ["-"]


def ours_parts(ours: dict[str, Any], spread: str) -> list[str]:
    """Our value of each measured published key: ``key=mean±sd`` (``±variance`` where the paper
    prints a variance), ``key: not measured: why``; the seeds' count last."""
    parts = []
    for key, m in ours.get("measures", {}).items():
        if "mean" not in m:
            parts.append(f"{key}: {m['metric']}")
            continue
        sd = m["sd"]
        spread_value = sd * sd if spread == "var" and sd == sd else sd
        parts.append(f"{key}={fmt(m['mean'], '.1f')}±{fmt(spread_value, '.1f')}")
    seeds = f"({ours['seeds']} seeds)"
    return [*parts[:-1], f"{parts[-1]} {seeds}"] if parts else [seeds]


def wrap_parts(parts: list[str], width: int) -> list[str]:
    """The parts joined with ", " on lines of at most ``width`` characters (a part longer than
    the width is wrapped at its spaces onto lines of its own): the published column is never cut."""
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 2 + len(part) <= width:
            lines[-1] += ", " + part
            continue
        if lines:
            lines[-1] += ","
        lines.extend(textwrap.wrap(part, width) if len(part) > width else [part])
    return lines


PUBLISHED_WIDTH = 50
OURS_WIDTH = 38


def _block(plan: dict[str, Any]) -> tuple[str, str, str]:
    """The block a row's saving compares within: the model(s) and the data set it ran (the models
    without their agent counts: CoT's "M*1" is in the block of MAD's "M*5")."""
    opts = plan["options"]
    models = ",".join(sorted({m.split("*")[0].strip() for m in str(opts.get("models") or "").split(",") if m}))
    return (models, str(opts.get("model") or ""), str(opts.get("dataset") or ""))


def _paper_savings(table_plans: list[dict[str, Any]]) -> dict[int, dict[str, str]]:
    """id(row) -> the paper's own total-token saving of that row against the MAD row of its block
    (the same published model and data set column), from the published ``tokens_k``, per data set
    column ("" for a row of one column): what our saving is read beside (GroupDebate's GD(5,3)
    vs MAD(5,3) on Arithmetic with GPT-3.5: 1 - 9.6/12.1 = +21 %)."""

    def block(p: dict[str, Any]) -> tuple[str, str]:
        return str(p.get("paper_model")), str(p.get("dataset_name"))

    def columns(p: dict[str, Any]) -> dict[str, float]:  # "Arithmetic: tokens_k" -> "Arithmetic"
        return {
            k.removesuffix("tokens_k").rstrip(": "): float(v)
            for k, v in p["published"].items()
            if k.endswith("tokens_k") and v
        }

    tokens = {id(p): columns(p) for p in table_plans}
    mads: dict[tuple[str, str], dict[str, Any]] = {}
    for p in table_plans:
        if p.get("options", {}).get("protocol") == "mad" and tokens[id(p)]:
            mads.setdefault(block(p), p)
    out: dict[int, dict[str, str]] = {}
    for p in table_plans:
        mad = mads.get(block(p))
        if mad is None or not tokens[id(p)]:
            continue
        base = tokens[id(mad)]
        out[id(p)] = {
            name: "base" if p is mad else f"{1 - value / base[name]:+.0%}"
            for name, value in tokens[id(p)].items()
            if name in base
        }
    return out


def print_table(table_plans: list[dict[str, Any]], simulated: bool) -> None:
    first = table_plans[0]
    print(f"\n{first['paper']}: {first['table']} — {first['title']}" + ("  [SIMULATED model]" if simulated else ""))
    spread = "variance" if first.get("spread") == "var" else "sd"
    prompts = any(p.get("options", {}).get("prompts") for p in table_plans)
    print(
        f"ours: mean ± {spread} over the seeds, under the published names; prompts: "
        + (
            f"the paper's where it gives them (scripts/paper_tables/{first['paper']}.json)"
            if prompts
            else "the engine's"
        )
    )
    if first.get("table_note"):
        print(f"note: {first['table_note']}")
    baselines = {}  # what ran (model, data set) -> the first MAD row that ran it: each block's own baseline
    for p in table_plans:
        if p.get("ours") and p["options"]["protocol"] == "mad":
            baselines.setdefault(_block(p), p)
    paper_saving = _paper_savings(table_plans)
    width, owidth = PUBLISHED_WIDTH, OURS_WIDTH
    print(
        f"{'method':28s} {'published':{width}s} {'ours':{owidth}s} {'tok/q':>9s} {'saving tot/in':>15s} "
        f"{'paper':>6s}  source"
    )
    for p in table_plans:
        ours, paper = p.get("ours"), paper_saving.get(id(p), {})
        published = wrap_parts(published_parts(p["published"]), width)
        mine: list[str] = []
        if ours is None:
            rest = "not run: " + p["skip"][:110]
        else:
            mine = wrap_parts(ours_parts(ours, p.get("spread", "sd")), owidth)
            mad = baselines.get(_block(p))
            saving = "-"
            if mad and mad is not p and mad["ours"]["tokens_per_q"]:
                saving = (
                    f"{1 - ours['tokens_per_q'] / mad['ours']['tokens_per_q']:+.0%}/"
                    f"{1 - ours['prompt_per_q'] / mad['ours']['prompt_per_q']:+.0%}"
                )
            elif mad is p:
                saving = "base"
            rest = (
                f"{mine[0]:{owidth}s} {fmt(ours['tokens_per_q'], ',.0f'):>9s} {saving:>15s} "
                f"{(paper.get('') or ('note' if paper else '-')):>6s}  {p['source'][:60]}"
            )
        print(f"{p['method'][:28]:28s} {published[0]:{width}s} {rest}")
        for k in range(1, max(len(published), len(mine))):  # the rest of both columns, under them
            left = published[k] if k < len(published) else ""
            right = mine[k] if k < len(mine) else ""
            print(f"{'':28s} {left:{width}s} {right}".rstrip())
        several = len(paper) > 1 or (paper and "" not in paper)  # a row of several data set columns
        if several and set(paper.values()) != {"base"}:
            by_column = ", ".join(f"{name} {value}" for name, value in paper.items())
            print(f"{'':28s} note: the paper's own saving vs its MAD row, by column: {by_column}")
        for note in p.get("notes", []):
            print(f"{'':28s} note: {note}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paper", required=True, choices=(*PAPERS, "all"))
    ap.add_argument(
        "--backend",
        default=None,
        help="auto | vllm | transformers | openai | simulated (default: the --config's, else auto)",
    )
    ap.add_argument("--api-base", default=None, help="--backend openai: the server")
    ap.add_argument("--config", default=None, help="YAML: run options for every run, models_map, datasets")
    ap.add_argument("--dataset", default=None, help="run every table on this dataset (path or hf:NAME)")
    ap.add_argument("--limit", type=int, default=50, help="questions per run (default 50)")
    ap.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="runs per row (default: the paper's repeats, 2..5; 1 runs each row once, without a spread)",
    )
    ap.add_argument("--tables", default="", help="comma list of table ids, e.g. 'Table 1,Table 4' (default all)")
    ap.add_argument("--out", default="runs/papers")
    ap.add_argument("--list", action="store_true", help="print what would run; run nothing")
    ap.add_argument(
        "--no-paper-prompts",
        action="store_true",
        help="run every row on the engine's default prompts, not its paper's (system prompt, limits, stage texts)",
    )
    args = ap.parse_args(argv)
    try:
        user = load_yaml(args.config, f"reproduce_seeds: --config {args.config}", ConfigError) if args.config else {}
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None
    if not isinstance(user, dict):
        raise SystemExit(f"reproduce_seeds: --config {args.config}: top level must be a mapping")
    out = Path(args.out)
    papers = PAPERS if args.paper == "all" else (args.paper,)
    runner = None
    report: dict[str, Any] = {}
    try:
        for name in papers:
            paper = load_paper(name)
            n_seeds = args.seeds or default_seeds(paper)
            plans = plan_rows(name, paper, user, args)
            if args.list:
                for p in plans:
                    print(
                        f"{name} | {p['table']} | {p['method']} | "
                        + (f"skip: {p['skip']}" if p["skip"] else json.dumps(p["options"], default=str))
                        + "".join(f" | note: {n}" for n in p.get("notes", []))
                    )
                continue
            simulated = False
            for p in plans:
                if p["skip"]:
                    continue
                if runner is None:
                    from actors.driver import DebateRunner

                    runner = DebateRunner(p["options"].get("ray_address"))
                try:
                    p["ours"] = run_plan(p, list(range(n_seeds)), out, runner)
                except ValueError as exc:  # an invalid cell (e.g. no regular graph) or bad input: listed, not fatal
                    p["skip"] = "invalid: " + str(exc).split("; first: ", 1)[-1]
                    continue
                simulated = simulated or p["options"]["backend"] == "simulated"
            for table_id in dict.fromkeys(p["table"] for p in plans):
                print_table([p for p in plans if p["table"] == table_id], simulated)
            report[name] = plans
    finally:
        if runner is not None:
            runner.shutdown()
    if not args.list:
        out.mkdir(parents=True, exist_ok=True)
        (out / "reproduce.json").write_text(json.dumps({"args": vars(args), "papers": report}, indent=2, default=str))
        print(f"\nsaved {out / 'reproduce.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
