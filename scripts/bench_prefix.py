"""Prefix caching in whole debates: prompt tokens sent and computed, paper vs shared layout.

Cells: each protocol of ``--protocols`` (default MAD and GroupDebate) x each agent count N of
``--agents`` (3, 6, 12, 24) x each layout of ``--layouts`` (``paper``, ``shared``:
docs/howto/prompt-layout.md), ``--rounds`` 3, ``--questions`` 4 per cell, ``--max-tokens`` 64,
the default temperature (0.7: greedy agents would all write the same round-0 reply and share
everything in either layout), on the default backend (vLLM on this machine's CPU, the packaged
SmolLM2, as README command 1 runs it). All cells run in ONE :class:`actors.driver.DebateRunner`,
the engine's ``debate run`` path, as a sweep does: the replica is started once, by a warm-up run
of one question (reported apart as ``startup``), and every cell reuses it, so the layouts of a
size run side by side on the same engine settings (their order alternates with N, so drift hits
both alike). Each cell debates questions of its own (``--offset``: no cell finds another's
questions in the cache; only the chat template's first blocks are shared between cells).

Per row: ``prompt_tokens`` (sent), ``cached_prompt_tokens`` (summed over calls: vLLM's
``num_cached_tokens``, the prefix-cache hits; null on a backend that cannot say, such as the
simulated one), ``computed_prompt_tokens`` (prompt - cached), ``wall_s`` (the debate, without
start-up: ``timings.debate_s``) and ``calls_per_s``; next to them the closed-form predictions:

* ``predicted_prompt_tokens``: :func:`engine.cost_predict.predict` with the constants measured
  by the serving model's own tokenizer (the simulated one's whitespace tokens there), the
  questions' mean length and the cell's measured mean reply length, so the error is the prompt
  model's, not a guess of reply lengths; ``prompt_rel_err`` = predicted / measured - 1;
* ``predicted_computed_tokens``: the same prediction's prefill left after a perfect prefix cache
  (``Cost.computed_prompt_tokens``) and ``computed_rel_err`` against the measured computed
  prefill; ``perfect_cache_computed_tokens``: that prefill counted exactly from the run's stored
  prompts (:func:`engine.prefix_runs.run_prefill`) and ``perfect_rel_err`` against the measured one (what
  vLLM misses: whole cache blocks only, evictions); ``predicted_vs_perfect_rel_err`` compares
  the two predictions (0 on the simulated backend where the closed form is exact). Null (and a
  line in the JSON's ``missing``) where the cost model does not cover the protocol;
* ``kv_question_tokens``: one question's KV tokens as the engine estimates them for its
  in-flight limit (:func:`engine.kv_budget.estimate_for`), with the replica's ``kv_cache_tokens``
  and the ``questions_in_flight`` the run used (``runs.engine``).

``--kv-in-flight on,off`` runs every cell twice, with the engine's KV-aware limit on questions in
flight and without it (``--no-kv-in-flight``: ``--max-concurrent-questions`` alone), one after the
other on fresh questions each: the prefix-cache hit rate (``cached_prompt_tokens`` /
``prompt_tokens``) with and without the limit; each row says ``kv_in_flight`` and the
``questions_in_flight`` it ran with. ``--kv-cache-bytes`` shrinks the replica's KV cache (the
engine's flag), so that the limit bites at a small N.

If this engine has ``debate serve``, one more line: the first protocol's smallest cell run as a
separate ``debate run --ray-address auto`` against a served replica (``serve``: serve, run and
stop seconds); else, or with ``--no-serve``, ``serve`` says it was skipped. Prints a table,
saves ``--out`` (JSON, rows + machine and commit) and a PNG beside it: prompt and computed
tokens and wall time against N.

Usage:
  .venv/bin/python scripts/bench_prefix.py                                   # full size (long: run alone)
  .venv/bin/python scripts/bench_prefix.py --agents 3 --questions 1 --rounds 2 --max-tokens 16
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.protocols.layout import PROMPT_LAYOUT  # noqa: E402
from scripts._bench_common import (  # noqa: E402
    agents_axis,
    debate_argv,
    finish,
    git_commit,
    loadavg,
    log_for,
    machine_info,
    rich_table,
    save_figure,
    scratch_dir,
)

PROTOCOLS = ("mad", "group")
LAYOUTS = ("paper", "shared")
KV_LIMIT = ("on", "off")  # --kv-in-flight / --no-kv-in-flight
BACKENDS = ("vllm", "simulated")
DEFAULT_AGENTS = "3,6,12,24"
SIMULATED_NOTE = "simulated backend: it has no prefix cache, so cached and computed prompt tokens are null"


class Counters(NamedTuple):
    """The serving model's token counters: a message body's tokens, a chat prompt's token ids
    and a chat prompt's tokens."""

    content: Callable[[str], int]
    chat_ids: Callable[[list[dict]], list[int]]
    chat: Callable[[list[dict]], int]


def parse_list(spec: str, flag: str, allowed: tuple[str, ...]) -> list[str]:
    """``"a,b"`` -> ["a", "b"], each one of ``allowed``; SystemExit naming the flag otherwise."""
    items = [s.strip() for s in spec.split(",") if s.strip()]
    bad = [s for s in items if s not in allowed]
    if not items or bad:
        raise SystemExit(f"bench_prefix: {flag} {spec!r}: comma-separated, each of {', '.join(allowed)}")
    return items


def parse_agents(spec: str) -> list[int]:
    """``"3,6"`` -> [3, 6]: agent counts, each >= 2; SystemExit naming ``--agents`` otherwise."""
    try:
        sizes = [int(s) for s in spec.split(",") if s.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(n < 2 for n in sizes):
        raise SystemExit(f"bench_prefix: --agents {spec!r}: comma-separated agent counts, each >= 2")
    return sizes


def cell_order(protocols: list[str], agents: list[int], layouts: list[str]) -> list[tuple[str, int, str]]:
    """Every (protocol, N, layout), the layouts of a size side by side, their order reversed at
    every other size (so a slow drift of the machine hits both layouts alike)."""
    cells = []
    for protocol in protocols:
        for i, n in enumerate(agents):
            cells += [(protocol, n, layout) for layout in (layouts if i % 2 == 0 else layouts[::-1])]
    return cells


# ----------------------------------------------------------------------------- predictions
def token_counters(cfg) -> Counters:
    """The counters of ``cfg``'s model: whitespace tokens on the simulated backend (its own), else
    the model's tokenizer with its chat template (as the replica counts prompts)."""
    from engine import word_tokens

    if cfg.simulated:
        return Counters(word_tokens.count_words, word_tokens.WordTokenizer(), word_tokens.count_tokens)
    from transformers import AutoTokenizer

    from backends.model_store import chat_token_ids, resolve_model

    tok = AutoTokenizer.from_pretrained(str(resolve_model(cfg.sampling.model)))

    def chat_ids(messages: list[dict]) -> list[int]:
        return chat_token_ids(tok, messages)

    return Counters(lambda text: len(tok.encode(text, add_special_tokens=False)), chat_ids, lambda m: len(chat_ids(m)))


def predictions(cfg, questions, counters: Counters, reply_tokens: float) -> dict[str, Any]:
    """The closed-form figures of a cell (module docstring): prompt tokens, the perfect-cache
    prefill where the cost model gives it, one question's KV tokens; None where not covered."""
    from engine.cost_model import NotCovered
    from engine.cost_predict import measure, predict
    from engine.kv_budget import estimate_for
    from engine.prompts import PromptSet

    sizes = measure(
        PromptSet.for_task(questions[0].task, cfg.experiment.prompts),
        counters.content,
        counters.chat,
        cfg.sampling.system_prompt,
    )
    q = sum(counters.content(x.text) for x in questions) / len(questions)
    options = {name: cfg.value(name) for name in cfg.options_read()}
    options["n_models"] = len(cfg.run_models())
    try:
        cost = predict(cfg.experiment.protocol, sizes, cfg.n_agents, cfg.n_rounds, q, reply_tokens, **options)
    except NotCovered:
        cost = None
    kv = estimate_for(cfg, questions)
    computed = None if cost is None else cost.computed_prompt_tokens
    n = len(questions)
    return {
        "predicted_prompt_tokens": None if cost is None else round(cost.prompt_tokens * n),
        "predicted_computed_tokens": None if computed is None else round(computed * n),
        "kv_question_tokens": None if kv is None else round(kv.tokens(cfg.n_agents)),
    }


def perfect_cache_computed(out_dir: Path, counters: Counters) -> int | None:
    """The run's prefill after a perfect prefix cache, counted from its stored prompts with the
    model's tokenizer (:func:`engine.prefix_runs.run_prefill`)."""
    from engine.prefix_runs import prefill_totals, run_prefill

    totals = prefill_totals(run_prefill(out_dir, counters.chat_ids))
    return int(totals["computed"].sum())


def rel_err(predicted: float | None, measured: float | None) -> float | None:
    """predicted / measured - 1 (4 decimals); None where either is unknown or measured is 0."""
    if predicted is None or not measured:
        return None
    return round(predicted / measured - 1, 4)


# ----------------------------------------------------------------------------- the cells
def base_config(args: argparse.Namespace):
    """The settings every cell shares (protocol, agents and layout are the cell's)."""
    from engine.config import DEFAULT_MODEL, RunConfig

    cfg = RunConfig.flat(
        protocol="mad",
        agents=2,
        rounds=args.rounds,
        limit=args.questions,
        max_tokens=args.max_tokens,
        backend=args.backend,
        model=DEFAULT_MODEL,
        progress=False,
        kv_cache_bytes=args.kv_cache_bytes,
    ).validate()
    if cfg.sampling.backend != args.backend:
        raise SystemExit(f"bench_prefix: --backend {args.backend}: not installed here (run scripts/setup.sh)")
    return cfg


def run_cell(runner, cfg, questions, counters: Counters) -> dict[str, Any]:
    """One cell's run on the shared runner, and its row (module docstring)."""
    res = runner.run(cfg, questions)
    s, t = res.summary, res.timings
    calls, debate_s = s["n_calls"], t.get("debate_s") or res.wall_s
    engine = res.engine[0] if res.engine else {}
    row: dict[str, Any] = {
        "protocol": cfg.experiment.protocol,
        "agents": cfg.n_agents,
        "layout": cfg.option(PROMPT_LAYOUT),
        "kv_in_flight": cfg.tuning.kv_in_flight,
        "questions": len(questions),
        "calls": calls,
        "prompt_tokens": s["prompt_tokens"],
        "cached_prompt_tokens": s["cached_prompt_tokens"],
        "computed_prompt_tokens": s["computed_prompt_tokens"],
        "completion_tokens": s["completion_tokens"],
        "errors": s["n_errors"],
        "wall_s": round(debate_s, 3),
        "calls_per_s": round(calls / debate_s, 2) if debate_s else None,
        "startup_s": round(t.get("replicas_s", 0.0) + t.get("agents_s", 0.0), 3),
        "run_id": res.run_id,
        "kv_cache_tokens": engine.get("kv_cache_tokens"),
        "questions_in_flight": engine.get("questions_in_flight"),
    }
    row.update(predictions(cfg, questions, counters, s["completion_tokens"] / calls if calls else 0.0))
    row["perfect_cache_computed_tokens"] = perfect_cache_computed(res.out_dir, counters)
    measured = row["computed_prompt_tokens"]
    row["prompt_rel_err"] = rel_err(row["predicted_prompt_tokens"], row["prompt_tokens"])
    row["computed_rel_err"] = rel_err(row["predicted_computed_tokens"], measured)
    row["perfect_rel_err"] = rel_err(row["perfect_cache_computed_tokens"], measured)
    row["predicted_vs_perfect_rel_err"] = rel_err(
        row["predicted_computed_tokens"], row["perfect_cache_computed_tokens"]
    )
    return row


def warm_up(runner, base, work: Path) -> dict[str, Any]:
    """Start the replica with a one-question, one-round MAD run of 2 agents; its seconds."""
    from engine.dataset_routing import load_questions

    cfg = base.replace(agents=2, rounds=1, limit=1, out=str(work / "warm"))
    t = time.perf_counter()
    res = runner.run(cfg, load_questions(cfg.experiment.dataset, cfg.experiment.task, 1, cfg.experiment.seed))
    return {
        "whole_s": round(time.perf_counter() - t, 3),
        **{k: round(v, 3) for k, v in res.timings.items()},
        "engine": res.engine,
    }


def run_cells(args: argparse.Namespace, base, cells, log) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The warm-up, then every cell (protocol, N, layout, KV limit on) on one DebateRunner;
    (start-up, rows)."""
    from actors.driver import DebateRunner
    from engine.dataset_routing import load_questions

    counters = token_counters(base)
    rows = []
    with scratch_dir() as work_dir, DebateRunner() as runner:
        work = Path(work_dir)
        startup = warm_up(runner, base, work)
        log(f"replica started and warm in {startup['whole_s']:.1f} s")
        for i, (protocol, n, layout, kv) in enumerate(cells):
            offset = (i + 1) * args.questions  # questions of its own (the warm-up has the first)
            cfg = base.replace(
                protocol=protocol,
                agents=n,
                prompt_layout=layout,
                kv_in_flight=kv,
                offset=offset,
                out=str(work / f"cell{i}"),
            ).validate()
            questions = load_questions(
                cfg.experiment.dataset, cfg.experiment.task, cfg.experiment.limit, cfg.experiment.seed, offset=offset
            )
            row = run_cell(runner, cfg, questions, counters)
            rows.append(row)
            log(
                f"{protocol:5s} N={n:3d} {layout:6s}{'' if kv else ' no KV limit'}: {row['calls']} calls, "
                f"prompt {row['prompt_tokens']:,}, computed {row['computed_prompt_tokens']}, "
                f"{row['questions_in_flight']} in flight, {row['wall_s']:.1f} s"
            )
            shutil.rmtree(work / f"cell{i}", ignore_errors=True)
    return startup, rows


# ----------------------------------------------------------------------------- debate serve
def has_serve(debate: list[str]) -> bool:
    """Whether this engine's CLI has ``debate serve`` (it came with branch serve)."""
    return subprocess.run([*debate, "serve", "--help"], capture_output=True, text=True).returncode == 0


def _timed(cmd: list[str], timeout_s: float) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    return round(time.perf_counter() - t, 3), done


def serve_line(args: argparse.Namespace, protocol: str, agents: int, work: Path, timeout_s: float = 900.0):
    """``debate serve``, then one cell as its own ``debate run --ray-address auto`` on the served
    replica, then ``debate serve --stop``: their seconds and the run's start-up (replicas_s
    near 0 when it used the served replica); ``status`` skipped where there is no serve."""
    from engine.results import read_table

    debate = debate_argv()
    if not has_serve(debate):
        return {"status": "skipped: this engine has no debate serve"}
    model = ["--backend", args.backend]
    run = [*debate, "run", "-q", *model, "--protocol", protocol, "--agents", str(agents), "--rounds", str(args.rounds)]
    run += ["--limit", str(args.questions), "--max-tokens", str(args.max_tokens), "--offset", "0"]
    run += ["--ray-address", "auto", "--out", str(work / "served")]
    out: dict[str, Any] = {"command": " ".join(run[1:])}
    try:
        out["serve_s"], done = _timed([*debate, "serve", *model], timeout_s)
        if done.returncode != 0:
            return {**out, "status": f"debate serve failed: {done.stderr.strip()[-500:]}"}
        out["run_whole_s"], done = _timed(run, timeout_s)
        if done.returncode != 0:
            return {**out, "status": f"debate run failed: {done.stderr.strip()[-500:]}"}
    finally:
        out["stop_s"], _ = _timed([*debate, "serve", "--stop"], timeout_s)
    runs = read_table(work / "served", "runs").to_pylist()[-1]
    timings = runs.get("timings")
    out.update(status="ok", timings=json.loads(timings) if isinstance(timings, str) else timings)
    return out


# ----------------------------------------------------------------------------- the whole benchmark
def measure(args: argparse.Namespace, log=print) -> dict[str, Any]:
    protocols = parse_list(args.protocols, "--protocols", PROTOCOLS)
    layouts = parse_list(args.layouts, "--layouts", LAYOUTS)
    kv_limit = [k == "on" for k in parse_list(args.kv_in_flight, "--kv-in-flight", KV_LIMIT)]
    agents = parse_agents(args.agents)
    base = base_config(args)
    res: dict[str, Any] = {
        "benchmark": "prefix",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "commit": git_commit(),
        "machine": machine_info(),
        "backend": base.sampling.backend,
        "simulated": base.simulated,
        "params": {
            "protocols": protocols,
            "agents": agents,
            "layouts": layouts,
            "kv_in_flight": args.kv_in_flight,
            "rounds": args.rounds,
            "questions": args.questions,
            "max_tokens": args.max_tokens,
            "kv_cache_bytes": args.kv_cache_bytes,
            "temperature": base.sampling.temperature,
            "model": base.sampling.model,
        },
        "loadavg_before": loadavg(),
    }
    if base.simulated:
        res["note"] = SIMULATED_NOTE
    ours = not _ray_up()
    cells = [(*cell, kv) for cell in cell_order(protocols, agents, layouts) for kv in kv_limit]
    res["startup"], res["rows"] = run_cells(args, base, cells, log)
    if ours:  # debate serve starts a Ray of its own; one that was up before (a test's) stays
        _shutdown_ray()
    res["missing"] = missing_predictions(res["rows"])
    if args.no_serve:
        res["serve"] = {"status": "skipped: --no-serve"}
    else:
        with scratch_dir() as work:
            res["serve"] = serve_line(args, protocols[0], min(agents), Path(work))
    log(f"debate serve: {res['serve']['status']}")
    res["loadavg_after"] = loadavg()
    return res


def _ray_up() -> bool:
    import ray

    return ray.is_initialized()


def _shutdown_ray() -> None:
    """End the Ray the runner started in this process, so that ``debate serve`` starts its own."""
    import ray

    ray.shutdown()


def missing_predictions(rows: list[dict[str, Any]]) -> list[str]:
    """The figures this engine could not give (null in every row), each with why."""
    why = {
        "predicted_computed_tokens": "the cost model does not cover this protocol's prefill",
        "cached_prompt_tokens": "the backend reports no prefix-cache hits",
    }
    return [f"{key}: {text}" for key, text in why.items() if rows and all(r[key] is None for r in rows)]


# ----------------------------------------------------------------------------- output
def _num(v: Any, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def print_table(res: dict[str, Any]) -> None:
    p = res["params"]
    console, table = rich_table(
        f"prefix caching: {res['backend']}, {p['rounds']} rounds, {p['questions']} questions per cell, "
        f"{p['max_tokens']}-token replies; commit {res['commit']}",
        (
            "protocol",
            "N",
            "layout",
            "calls",
            "prompt",
            "cached",
            "computed",
            "predicted prompt (err)",
            "predicted computed (err)",
            "perfect cache (err)",
            "KV/question",
            "in flight",
            "wall s",
            "calls/s",
        ),
    )
    for r in res["rows"]:
        table.add_row(
            r["protocol"],
            str(r["agents"]),
            r["layout"],
            str(r["calls"]),
            f"{r['prompt_tokens']:,}",
            _num(r["cached_prompt_tokens"], ","),
            _num(r["computed_prompt_tokens"], ","),
            f"{_num(r['predicted_prompt_tokens'], ',')} ({_num(r['prompt_rel_err'], '+.1%')})",
            f"{_num(r['predicted_computed_tokens'], ',')} ({_num(r['computed_rel_err'], '+.1%')})",
            f"{_num(r['perfect_cache_computed_tokens'], ',')} ({_num(r['perfect_rel_err'], '+.1%')})",
            _num(r["kv_question_tokens"], ","),
            _in_flight(r),
            f"{r['wall_s']:.2f}",
            _num(r["calls_per_s"], ".1f"),
        )
    console.print(table)
    console.print(f"start-up (replica load + warm-up run, once for all cells): {res['startup']['whole_s']:.1f} s")
    for line in [res.get("note"), *res["missing"]]:
        if line:
            console.print(f"not measured: {line}")
    sv = res["serve"]
    if sv["status"] == "ok":
        console.print(f"debate serve: {sv['serve_s']:.1f} s, then a run on it {sv['run_whole_s']:.1f} s whole")
    else:
        console.print(f"debate serve: {sv['status']}")


def _in_flight(row: dict[str, Any]) -> str:
    """The questions in flight a row ran with; ``(no KV limit)`` after it under ``--no-kv-in-flight``."""
    n = _num(row["questions_in_flight"], "d")
    return n if row["kv_in_flight"] else f"{n} (no KV limit)"


def plot(res: dict[str, Any], path: Path) -> Path:
    """Two panels against N, one line per protocol, layout and KV-limit setting: prompt (solid)
    and computed (dashed) tokens; wall seconds of the debate."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.5), dpi=110)
    FigureCanvasAgg(fig)
    tokens, wall = fig.subplots(1, 2)
    for key in dict.fromkeys(_line_key(r) for r in res["rows"]):  # in the rows' order
        rows = sorted((r for r in res["rows"] if _line_key(r) == key), key=_n)
        protocol, layout, kv = key
        name = f"{protocol} {layout}" + ("" if kv else " (no KV limit)")
        ns = [r["agents"] for r in rows]
        (line,) = tokens.plot(ns, [r["prompt_tokens"] for r in rows], marker="o", label=f"{name}: sent")
        computed = [(r["agents"], r["computed_prompt_tokens"]) for r in rows if r["computed_prompt_tokens"] is not None]
        if computed:
            tokens.plot(*zip(*computed), marker="x", linestyle="--", color=line.get_color(), label=f"{name}: computed")
        wall.plot(ns, [r["wall_s"] for r in rows], marker="o", color=line.get_color(), label=name)
    agents_axis(tokens, res["params"]["agents"], "prompt tokens (log; dashed: computed)", legend_size=7, log_y=True)
    agents_axis(wall, res["params"]["agents"], "debate wall time (s)", legend_size=7)
    p = res["params"]
    title = (
        f"prefix caching, {res['backend']}: {p['rounds']} rounds, {p['questions']} questions per cell, "
        f"{p['max_tokens']}-token replies; commit {res['commit']}"
    )
    return save_figure(fig, title, path)


def _n(row: dict[str, Any]) -> int:
    return row["agents"]


def _line_key(row: dict[str, Any]) -> tuple[str, str, bool]:
    """A plotted line: protocol, layout and whether the KV limit was on."""
    return row["protocol"], row["layout"], row["kv_in_flight"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", default=DEFAULT_AGENTS, help="comma-separated agent counts (default %(default)s)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--questions", type=int, default=4, help="questions per cell (default 4)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--protocols", default=",".join(PROTOCOLS), help="comma-separated, of %(default)s")
    ap.add_argument("--layouts", default=",".join(LAYOUTS), help="comma-separated, of %(default)s")
    ap.add_argument(
        "--kv-in-flight",
        default="on",
        help="the KV-aware limit on questions in flight: on (default), off, or on,off (each cell both ways)",
    )
    ap.add_argument(
        "--kv-cache-bytes",
        type=int,
        default=None,
        help="vLLM's KV cache per replica (default: the engine's); small, it makes the in-flight limit bite",
    )
    ap.add_argument("--backend", default="vllm", choices=BACKENDS, help="vllm (default); simulated for a smoke test")
    ap.add_argument("--out", default="bench/prefix.json", help="the JSON; the PNG is written beside it")
    ap.add_argument("--no-serve", action="store_true", help="leave out the debate serve line")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    res = measure(args, log=log_for(args.quiet))
    res["png"] = str(plot(res, Path(args.out).with_suffix(".png")))
    return finish(res, args.out, argv, args.quiet, print_table)


if __name__ == "__main__":
    sys.exit(main())
