"""``debate`` command line.

    debate run [--config FILE.yaml] [--protocol mad] [--agents 3] [--rounds 2] ...
    debate report DIR [--out REPORT_DIR] [--baseline mad] [--format table|md|csv] [--style screen|paper]
                      [--skip-bad-parts]
    debate rescore OUT [--dry-run] [--skip-bad-parts]  (re-grade stored replies; see app/rescore.py)
    debate sweep SWEEP.yaml [--out DIR] [--list] [--ray-address ADDR]
                                                (a grid of runs, resumable; see app/sweep.py;
                                                --list: the cells and their predicted cost, engine/plan.py)
    debate serve [run's model flags] [--list | --stop]  (replicas kept for later runs: actors/serve.py)
    debate export DIR --to FILE.parquet|.csv [--table questions|runs|calls|graphs]
    debate show OUT [--run ID] [--question ID | --wrong | --disagree | --changed] [--full] [--limit N]
                                                (stored debates round by round; see app/show.py)
    debate show OUT --html FILE [--run ID] [...]  (the same as one self-contained HTML page; app/page.py)
    debate protocols                            (name, paper and options of each protocol)
    debate --version

Every ``RunConfig`` field is a flag (``max_tokens`` -> ``--max-tokens``); a YAML ``--config``
file takes the same keys, and flags given on the command line win over it. ``run --help`` lists
the engine's options by their ``Option.group`` and each protocol's own options under it, every
one with its default. A mistyped flag, choice or key names the closest one; an option given that
the run does not read is a warning (:func:`app.sweep.unread_given`). Bad input
(:class:`engine.errors.UserError`) exits with status 2 and a one-line message naming the flag,
file or row; a run that stops (an actor died,
``--max-error-rate`` passed, a bug in the engine) exits with status 1 and one line on how to
resume; any other exception is a bug and surfaces with its traceback (status 1).

Each subcommand is a :class:`Command` in :data:`COMMANDS` (its flags and the function running it):
a new one is a module with those two functions and one :func:`register_command`.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import logging
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any, NoReturn

from rich.console import Console
from rich.table import Table
from rich.text import Text

from actors import serve
from app.page import write_page
from backends.registry import backend_choices, backend_help
from engine.config import (
    OLD_NAMES,
    PROTOCOL_OPTIONS,
    RunConfig,
    config_from_mapping,
    engine_options,
    load_config_file,
    new_names,
    option_readers,
)
from engine.errors import UserError
from engine.formatting import SIMULATED_MODEL
from engine.metrics import CACHED_SHARE, CACHED_SHARE_LABEL, format_aggregate, format_share, metrics
from engine.options import GROUPS, Option
from engine.protocols import SPECS
from engine.safe_text import inert, print_error

CONFIG_HELP = "YAML file with the same keys as the flags"


def _registry_flags() -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    """The help and choices of the flags read from registries when the parser is built (so a
    backend registered after import is offered too): ``--backend``, and ``--protocol``'s choices."""
    return {"backend": backend_help()}, {"backend": backend_choices(), "protocol": tuple(SPECS)}


_STATES_DEFAULT = re.compile(r"\(default|default[);:]")  # a help that already says its default


def _flag_help(opt: Option, readers: Sequence[str] = ()) -> str:
    """``--help`` of an option: its declared help, prefixed by the protocols that read it when
    several do, then in parentheses its default (``default X``) unless the help already states it
    (``(default ...``, ``default)``, ``default:``, ``default;``) and a number's range
    (``range [1, 10000]``, :attr:`Option.range_text`)."""
    text = opt.help
    if len(readers) > 1:
        text = f"{', '.join(readers)}: {text}"
    notes = [] if _STATES_DEFAULT.search(text) else [f"default {opt.default_text}"]
    if opt.range_text:
        notes.append(f"range {opt.range_text}")
    return f"{text} ({'; '.join(notes)})".lstrip() if notes else text


def _add_flag(group: Any, opt: Option, help_text: str, choices: tuple[Any, ...] | None) -> None:
    kind: dict[str, Any] = (
        {"action": argparse.BooleanOptionalAction}
        if opt.type is bool
        else {"type": str if opt.parse else opt.type, "choices": choices, "metavar": _metavar(opt, choices)}
    )
    if choices and not kind.get("metavar", "").startswith("{"):  # too many for the flag's line
        help_text = f"{', '.join(map(str, choices))}: {help_text}"
    group.add_argument(opt.flag, dest=opt.name, default=None, help=help_text.replace("%", "%%"), **kind)
    if opt.old_flag:  # the old name still works (parse_run_config warns); --help shows the new one only
        group.add_argument(opt.old_flag, dest=opt.old_name, default=None, help=argparse.SUPPRESS, **kind)


_LONGEST_CHOICES = 50  # a flag's {choices} longer than this is shown as NAME, its help listing them
# short names for the values of text flags whose own name would push their help to the next line
_METAVARS = {
    "out": "DIR",
    "system_prompt": "TEXT",
    "ray_address": "ADDR",
    "api_base": "URL",
    "reconcile_samples": "FILE",
    "embedding_model": "MODEL",
}


def _metavar(opt: Option, choices: tuple[Any, ...] | None) -> str:
    if choices:
        listed = "{" + ",".join(map(str, choices)) + "}"
        return listed if len(listed) <= _LONGEST_CHOICES else "NAME"
    return {int: "N", float: "X"}.get(opt.type) or _METAVARS.get(opt.name, opt.name.upper())


def _also_reads(shared: Sequence[tuple[str, str]]) -> str:
    """``; also reads --forgetting, --memory (under mad); --density (under sparse)``: the options
    a protocol section does not list, as (flag, section) pairs, grouped by the section listing them."""
    by_section: dict[str, list[str]] = {}
    for flag, section in shared:
        by_section.setdefault(section, []).append(flag)
    said = "; ".join(f"{', '.join(flags)} (under {section})" for section, flags in by_section.items())
    return f"; also reads {said}" if said else ""


def _add_run_flags(p: argparse.ArgumentParser) -> None:
    """One flag per option with ``cli`` set: the engine's and the backends' options
    (:func:`engine.config.engine_options`) in their ``group`` sections
    (:data:`engine.options.GROUPS`), then one section per protocol with the options of its spec
    (an option several protocols read: under the first, the others name it). ``--backend`` takes
    its help and choices from the backend registry."""
    p.add_argument("--config", metavar="FILE.yaml", help=CONFIG_HELP)
    helps, choices = _registry_flags()
    sections = {name: p.add_argument_group(name, what) for name, what in GROUPS.items()}
    for opt in engine_options():
        if opt.cli:
            help_text = helps.get(opt.name) or _flag_help(opt)
            _add_flag(sections[opt.group], opt, help_text, choices.get(opt.name, opt.choices))
    listed: dict[str, str] = {}  # option -> the protocol section it is listed in
    for name, spec in SPECS.items():
        own = [PROTOCOL_OPTIONS[o.name] for o in spec.settings if o.cli and o.name in PROTOCOL_OPTIONS]
        if not own:
            continue
        what = spec.help + _also_reads([(o.flag, listed[o.name]) for o in own if o.name in listed])
        section = p.add_argument_group(f"--protocol {name}", what)
        for opt in own:
            if opt.name not in listed:
                listed[opt.name] = name
                _add_flag(section, opt, _flag_help(opt, option_readers(opt.name)), opt.choices)


def parse_run_config(args: argparse.Namespace) -> RunConfig:
    """The RunConfig of ``debate run``: the ``--config`` file, then the flags given over it,
    checked. Logged as warnings, one line each: an option given by its old name (``--placement``,
    :func:`engine.config.new_names`), and options given that the run does not read."""
    # function-level: importing pyarrow.compute, pyarrow.parquet here keeps it off start-up
    from app.sweep import unread_given

    log = logging.getLogger("app.cli")
    data: dict[str, Any] = {}
    source = f"--config {args.config}" if args.config else "flags"
    if args.config:
        data, renamed = new_names(load_config_file(args.config), source)
        for line in renamed:
            log.warning(line)
    cfg_data = {k.replace("-", "_"): v for k, v in data.items()}
    given = {name: getattr(args, name, None) for name in (*(o.name for o in RunConfig.all_options()), *OLD_NAMES)}
    flags, renamed = new_names({k: v for k, v in given.items() if v is not None}, "flags")
    for line in renamed:
        log.warning(line)
    cfg_data.update(flags)
    cfg = config_from_mapping(cfg_data, source=source).validate()
    for line in unread_given(cfg, cfg_data):
        log.warning(line)
    return cfg


def serve_command(args: argparse.Namespace) -> int:
    """``debate serve`` (start and keep replicas), ``--list`` and ``--stop`` (:mod:`actors.serve`)."""
    cfg = parse_run_config(args)
    if args.list:
        return serve.list_command(cfg.cluster.ray_address)
    if args.stop:
        chosen = args.model or args.models or args.config
        return serve.stop_command(cfg.cluster.ray_address, cfg.run_models() if chosen else None)
    return serve.serve(cfg)


def protocols_command(args: argparse.Namespace | None = None) -> int:
    """``debate protocols``: each protocol's name, paper (its spec's help) and options with defaults."""
    table = Table(title="protocols (debate run --protocol NAME; options: debate run --help)")
    table.add_column("name", style="bold")
    table.add_column("what / paper")
    table.add_column("options (default)")
    for name, spec in SPECS.items():
        opts = [f"{o.flag if o.cli else o.name} ({o.default_text})" for o in spec.settings]
        table.add_row(name, spec.help, "\n".join(opts) or "-")
    Console().print(table)
    return 0


def summary_rows(result, cfg: RunConfig) -> list[tuple[str, str]]:
    """The printed run summary: the run's setup, questions (resumed ones said), accuracy, every
    metric aggregate that declares a label (:func:`engine.metrics.metrics`, in their order), the
    share of prompt tokens the prefix cache served (``n/a`` when no call reports it), then time
    and throughput (:func:`rate_text`), and the served replicas it used (:func:`served_rows`)."""
    s = result.summary
    return [
        ("protocol", cfg.experiment.protocol),
        (
            "backend / dtype / model",
            f"{getattr(result, 'backend', '') or cfg.sampling.backend} / {getattr(result, 'dtype', '-')} / "
            f"{model_text(cfg, result.simulated)}",
        ),
        ("agents x rounds", f"{cfg.n_agents} x {cfg.n_rounds}"),
        ("tie break", cfg.experiment.tie_break),
        ("questions", questions_text(result)),
        ("accuracy", f"{s['accuracy']:.3f}"),
        *((m.label, format_aggregate(m, s.get(m.summary, 0))) for m in metrics() if m.label),
        (CACHED_SHARE_LABEL, format_share(s.get(CACHED_SHARE.key))),
        ("errored questions", str(s.get("n_errored_questions", 0))),
        ("wall time (s)", f"{result.wall_s:.1f}"),
        ("generated tok/s", rate_text(result)),
        *served_rows(result),
        ("results", f"{result.out_dir}/{{calls,questions,runs}}"),
    ]


def model_text(cfg: RunConfig, simulated: bool) -> str:
    """The summary's model: the configured one(s), or for a simulated run no model's name."""
    models = cfg.sampling.models or cfg.sampling.model
    if not simulated:
        return str(models)
    return f"{SIMULATED_MODEL}; agents labelled {models}" if cfg.sampling.models else SIMULATED_MODEL


def questions_text(result) -> str:
    """The run's question count, and when some were resumed, how many of them were already done."""
    n, resumed = result.summary["n_questions"], getattr(result, "resumed", 0)
    return f"{n} ({resumed} already done, {n - resumed} debated now)" if resumed else str(n)


def rate_text(result) -> str:
    """Completion tokens per second generated by this process (the questions debated now, over
    its wall time); ``-`` when it generated none (every question resumed)."""
    tokens = getattr(result, "generated_tokens", result.summary["completion_tokens"])
    return f"{tokens / result.wall_s:.1f}" if tokens and result.wall_s > 0 else "-"


def served_rows(result) -> list[tuple[str, str]]:
    """The summary row naming the served replicas (``debate serve``) a run used, if any."""
    names = [p["served"] for p in getattr(result, "placement", None) or [] if p.get("served")]
    return [("served replicas used", ", ".join(names))] if names else []


def print_summary(result, cfg: RunConfig) -> None:
    """The run's summary table (:func:`summary_rows`); under it, when every question was resumed,
    a line saying that nothing was debated."""
    title = Text(inert(f"run {result.run_id}", lines=False))
    if result.simulated:
        title.append(" SIMULATED model", style="bold red")
    n = result.summary["n_questions"]
    resumed = n and getattr(result, "resumed", 0) == n
    caption = f"all {n} questions were already done in this folder: nothing debated now" if resumed else None
    table = Table(title=title, caption=caption, show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value", justify="right", overflow="fold")  # a long results path folds, never "…"
    for k, v in summary_rows(result, cfg):  # values quote the config: text, never markup
        table.add_row(k, Text(inert(v)))
    Console().print(table)


def report_command(args: argparse.Namespace) -> int:
    """``debate report``: print the summary table, write CSV/JSON/PNGs (see :mod:`app.report`)."""

    # function-level: importing pyarrow.compute, pyarrow.parquet here keeps it off start-up
    from app.report import ReportError, build_report, csv_table, markdown_tables, render_tables

    try:
        rep = build_report(args.dir, args.out, args.baseline, args.skip_bad_parts, args.figures, args.style)
    except (ReportError, OSError) as exc:
        return print_error(exc)
    if args.format != "table":  # stdout holds the table only; notes go to stderr
        sys.stdout.write(
            inert(
                markdown_tables(rep.rows, args.baseline) if args.format == "md" else csv_table(rep.rows, args.baseline)
            )
        )
        console = Console(stderr=True)
    else:
        console = Console()  # the terminal's width; off a terminal $COLUMNS, else 80
        for table in render_tables(rep.rows, args.baseline, console.width):
            console.print(table)
    for note in rep.notes:
        console.print(inert(f"note: {note}"), markup=False, highlight=False)
    console.print(
        inert(f"wrote {', '.join(p.name for p in rep.files)} to {rep.out_dir}"), markup=False, highlight=False
    )
    return 0


def export_command(args: argparse.Namespace) -> int:
    """``debate export``: one table of :func:`engine.results.load` to a Parquet or CSV file."""
    # function-level: importing pyarrow.compute, pyarrow.parquet here keeps it off start-up
    from engine.results import ResultsError, export

    try:
        results = export(args.dir, args.to, args.table, skip_bad_parts=args.skip_bad_parts)
    except (ResultsError, OSError) as exc:
        return print_error(exc)
    for note in results.notes:
        print(inert(f"note: {note}"), file=sys.stderr)
    print(f"wrote {len(results.table(args.table))} {args.table} rows to {args.to}")
    return 0


def show_command(args: argparse.Namespace) -> int:
    """``debate show``: stored debates in the terminal (:mod:`app.show`)."""
    # function-level: importing pyarrow.compute, pyarrow.parquet here keeps it off start-up
    from app.show import show

    # function-level: importing pyarrow.compute, pyarrow.parquet here keeps it off start-up
    from engine.results import ResultsError

    try:
        if args.html:
            return html_command(args)
        show(args.dir, args.run, args.question, args.only, args.full, args.limit, skip_bad_parts=args.skip_bad_parts)
    except ResultsError as exc:  # the folder named once, by the message or here
        where = "" if str(exc).startswith(str(args.dir)) else f"{args.dir}: "
        return print_error(f"{where}{exc}")
    except OSError as exc:
        return print_error(f"{args.dir}: {exc}")
    return 0


def html_command(args: argparse.Namespace) -> int:
    """``debate show OUT --html FILE``: the selected debates as one HTML page (:mod:`app.page`)."""
    # function-level: importing pyarrow.compute, pyarrow.parquet here keeps it off start-up
    from app.transcript import debate_views

    # function-level: importing pyarrow.compute, pyarrow.parquet here keeps it off start-up
    from engine.results import load

    results = load(args.dir, skip_bad_parts=args.skip_bad_parts)
    views = debate_views(results, args.run, args.question, args.only)
    try:
        out = write_page(views, args.html, title=f"debates in {args.dir}")
    except OSError as exc:  # the page, not the results folder: nothing written (app.page.write_atomic)
        return print_error(f"{args.html}: cannot write the page: {exc.strerror or exc}; nothing written")
    for note in results.notes:
        print(inert(f"note: {note}"), file=sys.stderr)
    size = out.stat().st_size / 2**20
    print(
        inert(
            f"wrote {out} ({len(views)} debate{'s' if len(views) != 1 else ''}, {size:.1f} MiB): open it in a browser"
        )
    )
    return 0


SHOW_HELP = """\
Show stored debates round by round: the question, each agent's call (model,
group, whom it read, its answer graded ✓/✗, the reply shortened to two lines,
tokens), the summaries, each round's vote and the final answer. With several
questions selected, one line per question is listed first, then the first
--limit debates are shown (default 1; 0: the list only). Graph nodes: agents
0, 1, ...; S<g> is the summary of group g; '*' marks an agent that changed its
answer; ★ the strong model's agents (--models); ✓/✗ grade an answer against
the gold with the run's grader."""


SERVE_HELP = """\
Start the replicas a 'debate run' with the same model flags would start
(--backend, --model or --models, --replicas, engine settings such as
--max-batch and --dtype, GPU options, --config) and keep them: they stay up
after this command returns, and every later run or sweep on that Ray
(--ray-address ADDR, or auto on this machine) whose replica has the same setup
(backend, model, backend options, max batch) uses it instead of loading the
model again; one with another setup starts its own and a warning says why.
Without a Ray to join (--ray-address, $RAY_ADDRESS, or a 'ray start' on this
machine) it starts one, on 127.0.0.1 only. Flags other than the model's are
read but not used. --list lists the served replicas; --stop ends them."""


class InertFormatter(logging.Formatter):
    """A log formatter whose records are printed inert (:func:`engine.safe_text.inert`): a message
    quoting a question id, a reply or an error cannot drive the terminal. Newlines and tabs stay
    (a traceback keeps its lines)."""

    def format(self, record: logging.LogRecord) -> str:
        return inert(super().format(record))


def setup_logging(verbose: int = 0, quiet: bool = False) -> None:
    """The engine's module loggers (``engine.*``, ``actors.*``, ``topologies.*``) to stderr:
    warnings by default (retries, restarts, timeouts), ``-v`` their decisions, ``-vv`` debug,
    ``-q`` errors only. Actors log in their own processes; Ray forwards their output and its own
    warnings, except under ``-q`` (see :func:`actors.driver.init_ray`). Records are printed inert
    (:class:`InertFormatter`)."""
    level = logging.ERROR if quiet else (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(InertFormatter("%(levelname)s %(name)s: %(message)s"))
    for name in ("engine", "actors", "topologies"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False


class _KeepBreaks(argparse.RawDescriptionHelpFormatter):
    """Help laid out by argparse, except a text written with line breaks (a command's description
    with examples), which is shown as written; the sections' one-line descriptions are wrapped."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return super()._fill_text(text, width, indent)
        return argparse.HelpFormatter._fill_text(self, text, width, indent)


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (no usage dump): ``debate run: error: ... (see --help)``;
    a mistyped choice gets the closest one (``did you mean 'sparse'?``)."""

    def error(self, message: str) -> NoReturn:
        bad = re.match(r"argument (\S+): invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if bad:
            known = [c.strip().strip("'") for c in bad[3].split(",")]
            close = difflib.get_close_matches(bad[2], known, n=1)
            if close:
                message = f"argument {bad[1]}: invalid choice: {bad[2]!r} (did you mean {close[0]!r}?)"
        self.exit(2, f"{self.prog}: error: {inert(message, lines=False)} (see {self.prog} --help)\n")


def _unknown_flags(parser: argparse.ArgumentParser, extra: Sequence[str]) -> str:
    """The error for arguments no flag took, with the closest flag of ``parser`` to each unknown one."""
    known = [f for f in parser._option_string_actions if f.startswith("--")]
    old = {"--" + o.replace("_", "-"): "--" + n.replace("_", "-") for o, n in OLD_NAMES.items()}
    hints = []
    for arg in extra:
        flag = arg.split("=", 1)[0]
        close = difflib.get_close_matches(flag, known, n=1) if flag.startswith("--") else []
        if close:  # an old name (--placement) comes with the name now
            hints.append((flag, f"{close[0]}, now {old[close[0]]}" if close[0] in old else close[0]))
    if len(hints) == 1:
        return f"unrecognized arguments: {' '.join(extra)} (did you mean {hints[0][1]}?)"
    said = "; ".join(f"{flag}: did you mean {close}?" for flag, close in hints)
    return f"unrecognized arguments: {' '.join(extra)}" + (f" ({said})" if hints else "")


def _add_skip_bad_parts(p: argparse.ArgumentParser, what: str = "read the rest") -> None:
    p.add_argument(
        "--skip-bad-parts",
        action="store_true",
        help=f"leave out Parquet part files that cannot be read (truncated, empty, not Parquet), a note naming "
        f"each, and {what} (default: stop with an error naming the file)",
    )


@functools.cache  # read from the installed metadata once, not at every parser built
def _version() -> str:
    try:
        return f"debate {version('debate-engine')}"
    except PackageNotFoundError:  # run from a tree that was never installed (a carried-in copy)
        return "debate (version unknown: not installed)"


def _report_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="a run directory or a folder holding many (any depth)")
    p.add_argument("--out", help="where to write summary.csv/json and the PNGs (default DIR/report)")
    p.add_argument(
        "--baseline",
        default="mad",
        choices=tuple(SPECS),
        metavar="NAME",
        help=f"protocol that savings compare with: {', '.join(SPECS)} (default mad)",
    )
    p.add_argument(
        "--format",
        default="table",
        choices=("table", "md", "csv"),
        help="print the tables as rich tables (default), Markdown or CSV (notes then go to stderr)",
    )
    p.add_argument(
        "--no-figures",
        dest="figures",
        action="store_false",
        help="write the tables only (summary.csv/json), no figures: seconds instead of the figures' drawing time",
    )
    p.add_argument(
        "--style",
        default="screen",
        choices=("screen", "paper"),
        help="figures for the screen (default) or for a paper: 3.5 in (one column) or 7.2 in (two) wide, "
        "300 dpi, 7-8 pt text, legends below, captions in <figure>.caption.txt",
    )
    _add_skip_bad_parts(p)


def _rescore_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="OUT", help="a run directory or a folder holding many (a sweep)")
    p.add_argument("--dry-run", action="store_true", help="print what would change; write nothing")
    _add_skip_bad_parts(p, "re-grade the other run directories only: nothing is written to a folder with one")


def _sweep_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", metavar="SWEEP.yaml", help="run options plus grid: {option: [values]}")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="sweep directory: DIR/sweep.json and one folder per cell, DIR/<protocol>_n<N>_r<T>..._s<seed>-<hash>/ "
        "(default: the file's out: key; one of the two is required)",
    )
    p.add_argument(
        "--list",
        action="store_true",
        help="list the cells, their status and predicted calls and tokens (per question, per cell, in all); "
        "run nothing",
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="Ray cluster to join, host:port or auto (default: the file's ray_address, else $RAY_ADDRESS, else "
        "as ray.init() without an address); replicas that 'debate serve' keeps there are reused",
    )


def _serve_flags(p: argparse.ArgumentParser) -> None:
    action = p.add_mutually_exclusive_group()
    action.add_argument("--list", action="store_true", help="list the served replicas; start nothing")
    action.add_argument(
        "--stop",
        action="store_true",
        help="end the served replicas (only those of the model(s) given with --model/--models/--config), then "
        "the Ray that debate serve started once none is left",
    )
    _add_run_flags(p)


def _export_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="a run directory or a folder holding many (any depth)")
    p.add_argument("--to", required=True, metavar="FILE", help="FILE.parquet or FILE.csv")
    p.add_argument(
        "--table",
        default="questions",
        choices=("questions", "runs", "calls", "graphs", "prompts"),
        help="questions (default; with the run options joined on), runs, calls, graphs or prompts",
    )
    _add_skip_bad_parts(p)


def _show_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="OUT", help="a run directory, an --out folder or a sweep folder")
    p.add_argument("--run", metavar="ID", help="only this run (its id or a unique prefix)")
    pick = p.add_mutually_exclusive_group()
    pick.add_argument("--question", metavar="ID", help="only this question (its id or a unique prefix)")
    for name, what in (
        ("wrong", "questions whose final answer is wrong"),
        ("right", "questions whose final answer is right"),
        ("disagree", "questions whose agents' last answers are not all equal"),
        ("changed", "questions where some agent changed its answer between rounds"),
    ):
        pick.add_argument(f"--{name}", dest="only", action="store_const", const=name, help=f"only {what}")
    p.add_argument("--full", action="store_true", help="whole replies (default: about two lines each)")
    p.add_argument(
        "--limit", type=int, default=1, metavar="N", help="debates shown after the list (default 1; 0: list only)"
    )
    p.add_argument(
        "--html",
        metavar="FILE",
        help="write the selected debates (all, without --run/--question/...) as one self-contained HTML page "
        "(graphs per round, replies, filters; opens offline in any browser) instead of printing them",
    )
    _add_skip_bad_parts(p)


def _no_flags(p: argparse.ArgumentParser) -> None:
    pass


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``debate`` parser with every registered subcommand (:data:`COMMANDS`) and its flags;
    builds it only (runs nothing, imports no Ray). :func:`main` parses with it; the docs site's CLI
    reference is generated from it. ``only``: the one subcommand whose flags are added (the others
    are listed, without flags): what :func:`main` parses a command line with, so that ``debate
    show`` does not build ``debate run``'s hundred flags."""
    parser = _Parser(prog="debate", description="Distributed multi-agent debate engine")
    parser.add_argument("--version", action="version", version=_version())
    common = _Parser(add_help=False)  # a parent: only its arguments are copied into the subcommands
    common.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log the engine's decisions (replicas, retries, restarts, resume); -vv: debug",
    )
    common.add_argument("-q", "--quiet", action="store_true", help="log errors only")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS.values():
        kwargs: dict[str, Any] = {"help": command.help, "parents": [common] if command.logs else []}
        if command.usage:
            kwargs["usage"] = command.usage
        if command.description:
            kwargs["description"] = command.description
            if "\n" in command.description:  # written as it should show: line breaks kept
                kwargs["formatter_class"] = _KeepBreaks
        added = sub.add_parser(command.name, **kwargs)
        if only is None or command.name == only:
            command.flags(added)
    return parser


def parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser :func:`main` parses ``argv`` with: :func:`build_parser` with only the named
    subcommand's flags (the subcommand is the first word that is no flag: the top level takes
    only --help and --version); every subcommand's flags when ``argv`` names none it knows."""
    named = next((w for w in argv if not w.startswith("-")), None)
    return build_parser(named if named in COMMANDS else None)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """name -> parser of each subcommand of :func:`build_parser`'s parser, in the order it lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def main(argv: Sequence[str] | None = None) -> int:
    """The ``debate`` command: parse ``argv`` and run the subcommand; returns the exit status. Ctrl-C
    outside a run (while reading results, before Ray starts) is one line and 130, too."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("\ndebate: interrupted", file=sys.stderr)
        return 130


def _main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    parser = parser_for(words)
    args, extra = parser.parse_known_args(words)
    if extra:
        sub = subcommands(parser).get(getattr(args, "command", None) or "", parser)
        sub.error(_unknown_flags(sub, extra))
    command = COMMANDS[args.command]
    if command.logs:
        setup_logging(args.verbose, args.quiet)
    if not command.engine:
        try:
            return command.run(args)
        except UserError as exc:  # only these: a ValueError from a bug surfaces with its traceback (exit 1)
            return print_error(exc)
    # function-level: importing actors.driver (Ray) here keeps it off start-up
    from actors.driver import EngineError, RunInterrupted

    try:
        return command.run(args)
    except UserError as exc:
        return print_error(exc)
    except RunInterrupted as exc:  # not the user's input: one line, how to resume; 130/143 for a signal
        if str(exc).startswith("interrupted"):
            print(f"debate: {inert(str(exc), lines=False)}", file=sys.stderr)
            return exc.exit_code
        return print_error(exc, status=exc.exit_code)
    except EngineError as exc:  # a bug: its traceback was logged; exit 1, one line, how to resume
        return print_error(exc, status=1)


def run_command(args: argparse.Namespace) -> int:
    """``debate run``: one configuration (:func:`actors.driver.run`), then its summary table."""
    cfg = parse_run_config(args)
    # function-level: importing actors.driver (Ray) here keeps it off start-up
    from actors.driver import run

    result = run(cfg)  # checks every input before Ray starts
    print_summary(result, cfg)
    return 0


def sweep_command(args: argparse.Namespace) -> int:
    """``debate sweep``: a grid of runs (:mod:`app.sweep`)."""
    # function-level: importing app.sweep (Ray) here keeps it off start-up
    from app import sweep

    return sweep.sweep_command(args.config, args.out, args.list, args.ray_address)


def rescore_command(args: argparse.Namespace) -> int:
    """``debate rescore``: re-grade stored replies (:mod:`app.rescore`)."""
    # function-level: importing pyarrow.compute, pyarrow.parquet here keeps it off start-up
    from app import rescore

    return rescore.rescore_command(args.dir, args.dry_run, args.skip_bad_parts)


@dataclass(frozen=True)
class Command:
    """One ``debate`` subcommand: its name and help line, the function adding its flags to its
    parser and the one running it with the parsed flags (returns the exit status). A command is
    one module with those two functions plus one :func:`register_command`; a
    :class:`~engine.errors.UserError` it raises is one line and exit status 2."""

    name: str
    help: str
    flags: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str | None = None  # its --help text above the flags (line breaks kept when it has some)
    usage: str | None = None  # its usage line, where argparse's listing of every flag would be too long
    logs: bool = True  # takes -v/-q and sets up logging before it runs
    engine: bool = False  # runs the engine: a stopped run is one line on how to resume, its exit status


COMMANDS: dict[str, Command] = {}  # by name, in the order --help lists them


def register_command(command: Command, replace: bool = False) -> Command:
    """Add ``command`` to ``debate`` (listed after those registered before it); a ValueError for a
    name taken, unless ``replace``."""
    if command.name in COMMANDS and not replace:
        raise ValueError(f"a command named {command.name!r} is registered already")
    COMMANDS[command.name] = command
    return command


def unregister_command(name: str) -> None:
    """Remove the command ``name`` (a test's own, say); nothing when there is none."""
    COMMANDS.pop(name, None)


RUN_DESCRIPTION = """\
Run one debate configuration: a protocol's agents debate a data set's
questions over some rounds; results go to --out, a summary to the terminal.
Every flag is also a key of the --config YAML file; flags given win over it.

examples:
  debate run --backend simulated --limit 5        (no model: a quick try)
  debate run --protocol sparse --agents 6 --density 2/5 --rounds 3
  debate run --config my.yaml --model Qwen/Qwen2.5-7B-Instruct --out runs/q7

Options are listed by section, then each protocol's own ones under
'--protocol NAME' ('debate protocols' lists the protocols and their papers)."""
SWEEP_DESCRIPTION = """\
Run a grid of configurations from one YAML file: its top-level keys are
'debate run' options, and its grid: {option: [values]} expands to every
combination, one run and one folder per cell. Run the same command again to
resume: finished cells are kept.

examples:
  debate sweep sweep.yaml --out runs/sweep1 --list  (the cells; runs nothing)
  debate sweep sweep.yaml --out runs/sweep1         (run them, or resume)
  debate report runs/sweep1                         (tables and figures)"""
RESCORE_HELP = (
    "re-grade the stored replies of a run or sweep folder with the current grader (new Parquet parts; model "
    "outputs untouched)"
)
for _command in (
    Command(
        "run",
        "run one debate configuration",
        _add_run_flags,
        run_command,
        RUN_DESCRIPTION,
        usage="%(prog)s [--config FILE.yaml] [options]",
        engine=True,
    ),
    Command(
        "report",
        "tables and plots from result directories (one run, many runs or a sweep)",
        _report_flags,
        report_command,
    ),
    Command("rescore", RESCORE_HELP, _rescore_flags, rescore_command),
    Command(
        "sweep",
        "run a grid of configurations from a YAML file (resumable)",
        _sweep_flags,
        sweep_command,
        SWEEP_DESCRIPTION,
        engine=True,
    ),
    Command(
        "serve",
        "start a model's replicas and keep them for later runs (--list, --stop)",
        _serve_flags,
        serve_command,
        SERVE_HELP,
        usage="%(prog)s [--list | --stop] [run's model options]",
        engine=True,
    ),
    Command(
        "export",
        "one result table, de-duplicated, run options as columns, to Parquet or CSV",
        _export_flags,
        export_command,
    ),
    Command("show", "stored debates round by round in the terminal", _show_flags, show_command, SHOW_HELP),
    Command(
        "protocols",
        "list the protocols: name, paper, options and their defaults",
        _no_flags,
        protocols_command,
        logs=False,
    ),
):
    register_command(_command)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
