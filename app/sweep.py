"""``debate sweep CONFIG.yaml --out DIR``: a grid of runs from one YAML file, resumable.

The file's top-level keys are ``debate run`` options with the flags' names (``backend:
simulated``, ``limit: 30``, ``max-tokens`` or ``max_tokens``), shared by every cell; ``grid:``
maps options to lists of values, and the sweep runs their cross product::

    backend: simulated
    limit: 30
    agents: 4
    grid:
      protocol: [mad, sparse]
      density: [1/3, 1]
      seed: [1, 2]

``out:`` at the top level is the sweep directory when ``--out`` is not given. First-round reuse
(``reuse_first_round``, :mod:`actors.cache_actor`) is ON in a sweep unless the file says
``reuse_first_round: false``.

Cells. A grid point becomes a :class:`~engine.config.RunConfig`; options its protocol (or
backend) does not read are reset to their defaults (:func:`normalise`) *before* cells are
de-duplicated by run id, so ``density: [0.4, 0.8]`` x ``protocol: [mad, sparse]`` is three cells
(mad once, sparse twice), not four. What each protocol reads is its spec's ``settings``
(:class:`~engine.protocols.spec.ProtocolSpec`; ``debate run --help`` lists each protocol option
with the protocols that read it) minus the ones its config leaves unused (sparse reads ``center``
only with ``topology: star``; S2-MAD reads ``tau`` and ``embedding_model`` only with
``similarity: embedding``; CortexDebate reads ``forgetting`` only with ``cortex_memory: full``);
CoT runs one agent and one round, CoT-SC one round (``ProtocolSpec.shape``). A grid axis that no
cell reads is an error naming the protocols that read it.

Per backend: ``sim_*`` options only with ``backend: simulated``, ``api_*`` only with
``backend: openai``. A cell that is invalid (e.g. sparse with a density that has no regular graph
for its agent count, probmad without a density) is reported, listed in the manifest with its
error and skipped; the sweep fails only if no cell is valid. Options that do not change results
(they are not part of :meth:`RunConfig.run_id`: ``out``, ``reuse_first_round``, ``progress``,
``max_batch``, ...) cannot be grid axes, since their cells would share one run id. A grid of
more than :data:`MAX_GRID_POINTS` points is refused before any cell is made.

Layout. Cell ``c`` writes a normal run directory ``DIR/<name>/`` (``calls/``, ``questions/``,
``graphs/``, ``runs/``; exactly what ``debate run --out DIR/<name>`` writes), named by
:func:`cell_dir_name`: a readable prefix, then the hash of the deterministic
:meth:`RunConfig.run_id` of its normalised config (``sparse_n6_r3_d0.4_s1-1a2b3c4d5e`` for run
``sparse-1a2b3c4d5e``), so the same file always maps a cell to the same directory. The run id
(in every row and in the manifest) stays the id; a folder is only where a run is. A sweep
started before folders had names keeps its ``DIR/<run_id>/`` folders. ``DIR/sweep.json`` is the
manifest: the file, the grid, and per cell its params, run id, directory, status (``pending``, ``partial``, ``running``,
``finished``, ``invalid``, ``error``, ``stopped``, ``busy``: another process runs it), error and,
when finished, accuracy and tokens. It is
rewritten (atomically) when a cell starts and ends.

Resume. Re-running the same command skips finished cells and resumes the others through
:meth:`actors.driver.DebateRunner.run`, which debates only questions that have no result row yet, so
no finished (run, question) is ever repeated or duplicated. One ``DebateRunner`` serves the whole
sweep: replicas (loaded models), embedders and the first-round cache are kept across cells.

Everything here but :func:`run_sweep` (which starts Ray through the DebateRunner) is pure.
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import json
import logging
import os
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from actors.driver import DebateRunner, ErrorRateExceeded, RunInterrupted
from actors.interrupts import exit_code, stop_signals
from app.cells import Cell, short_value
from app.plan_table import cell_lines, header, plan_cells, plan_table
from backends.registry import backend_specs
from engine.accounting import mean_sd, seed_groups, seed_key
from engine.config import (
    OLD_NAMES,
    PROTOCOL_OPTIONS,
    ConfigError,
    RunConfig,
    config_from_mapping,
    did_you_mean,
    new_names,
    option_readers,
    resolve_backend,
    unhashed_options,
)
from engine.errors import UserError
from engine.inputs import check_out_dir, load_yaml
from engine.progress import progress as progress_display
from engine.protocols import SPECS, validate_protocol
from engine.protocols.layout import PROMPT_LAYOUT, unread_note
from engine.results import footer_problems, read_table
from engine.run_lock import RunLocked
from engine.safe_text import inert

GRID = "grid"
MANIFEST = "sweep.json"
CELL_COLUMN = 32  # the least width of --list's cell column; narrower, the cells are listed above the table
MAX_GRID_POINTS = 100_000  # the cells of one sweep (each a run); more is a grid written by mistake


log = logging.getLogger(__name__)


class SweepError(ConfigError):
    """A bad sweep file; the message names the file and the key."""


# ---------------------------------------------------------------------------------- options
def _fields() -> dict[str, Any]:
    """Every run option by name: its Option (core parts, backends, protocols)."""
    return {opt.name: opt for opt in RunConfig.all_options()}


def unused_options(cfg: RunConfig) -> set[str]:
    """Options of ``cfg`` that its protocol and backend do not read (see the module docstring)."""
    unused: set[str] = set()
    spec = SPECS.get(cfg.experiment.protocol)
    if spec is not None:  # an unknown protocol is reported by validate(), not normalised
        unused |= set(PROTOCOL_OPTIONS) - cfg.options_read()

    for other in backend_specs():  # options read only by one backend, by name prefix (its registry entry)
        prefix = other.option_prefix
        if prefix and other.name != cfg.sampling.backend:
            unused |= {name for name in _fields() if name.startswith(prefix)}
    return unused


def unread_given(cfg: RunConfig, given: Iterable[str]) -> list[str]:
    """One line per option in ``given`` (the flags and YAML keys set explicitly) that this run
    does not read (:func:`unused_options`; ``--agents``/``--rounds`` beyond what the protocol
    uses, e.g. CoT's one agent), saying who reads it; ``debate run`` logs them as warnings. An
    option in ``given`` by its old name (``placement``) counts as its name now."""
    unused = unused_options(cfg)
    prefixes = {b.option_prefix: b.name for b in backend_specs() if b.option_prefix}
    shape = (
        dict(zip(("agents", "rounds"), SPECS[cfg.experiment.protocol].shape(cfg)))
        if cfg.experiment.protocol in SPECS
        else {}
    )
    lines = []
    for name in sorted({OLD_NAMES.get(n, n) for n in (str(k).replace("-", "_") for k in given)}):
        flag = "--" + name.replace("_", "-")
        if name in shape and shape[name] != cfg.value(name):
            lines.append(
                f"{flag} {cfg.value(name)} is ignored: --protocol {cfg.experiment.protocol} uses {shape[name]}"
            )
        elif name == PROMPT_LAYOUT.name and name in unused and unread_note(cfg.experiment.protocol):
            lines.append(str(unread_note(cfg.experiment.protocol)))
        elif name in unused and name in PROTOCOL_OPTIONS:
            readers = ", ".join(option_readers(name)) or "no protocol"
            lines.append(
                f"{flag} is ignored: --protocol {cfg.experiment.protocol} does not read it here (read by {readers})"
            )
        elif name in unused:
            backend = next((b for p, b in prefixes.items() if name.startswith(p)), "another backend")
            lines.append(f"{flag} is ignored: only --backend {backend} reads it (this run: {cfg.sampling.backend})")
    return lines


def normalise(cfg: RunConfig) -> RunConfig:
    """A copy of ``cfg`` with the options it does not read at their defaults (CoT: 1 agent and 1
    round; CoT-SC: 1 round), so configs that give the same results get the same run id."""
    defaults = RunConfig()  # one fresh config: each default a mapping or list of its own
    changes = {name: defaults.value(name) for name in unused_options(cfg)}
    if cfg.experiment.protocol in SPECS:  # the agents and rounds the protocol really uses (CoT: 1 and 1)
        changes.update(zip(("agents", "rounds"), SPECS[cfg.experiment.protocol].shape(cfg)))
    return cfg.replace(**changes)


def check_cell(cfg: RunConfig) -> str | None:
    """Why this config cannot run (the message of the error ``debate run`` would give), or None.

    Pure: the RunConfig checks, the protocol's own checks (e.g. the regular graph for
    ``density`` x ``agents``, the groups) and model placement; no dataset is read.
    """
    try:
        cfg.validate()
        validate_protocol(cfg)
        cfg.agent_specs()
    except (UserError, TypeError) as exc:  # ConfigError, TopologyError, ...; a bug's ValueError surfaces
        return str(exc) or type(exc).__name__
    return None


# ---------------------------------------------------------------------------------- the file
@dataclass
class SweepSpec:
    path: str
    base: dict[str, Any]  # top-level run options (underscored names), without grid/out
    grid: dict[str, list[Any]]  # axis -> values, in file order
    out: str | None = None  # the file's ``out:`` (sweep directory when --out is not given)

    @property
    def n_points(self) -> int:
        n = 1
        for values in self.grid.values():
            n *= len(values)
        return n


def _known(path: str, key: Any, where: str) -> str:
    name = str(key).replace("-", "_")
    fields = _fields()
    if name not in fields:
        raise SweepError(f"{path}: {where}{key!r} is not a run option{did_you_mean(name, [*fields, *OLD_NAMES], True)}")
    return name


def parse_sweep(data: Any, path: str = "sweep") -> SweepSpec:
    """Check a parsed sweep file (see the module docstring); errors name ``path`` and the key. An
    option given by its old name (``placement``) is read as its name now, with one warning."""
    if not isinstance(data, dict):
        raise SweepError(f"{path}: top level must be a mapping of option: value (plus grid:)")
    data, renamed = new_names(data, path)
    if isinstance(data.get(GRID), dict):
        data[GRID], grid_renamed = new_names(data[GRID], f"{path} grid")
        renamed += grid_renamed
    for line in renamed:
        log.warning(line)
    base: dict[str, Any] = {}
    grid_raw: Any = {}
    out = None
    for key, value in data.items():
        if key == GRID:
            grid_raw = value
            continue
        if str(key) == "out":
            out = None if value is None else str(value)
            continue
        name = _known(path, key, "key ")
        if name in base:
            raise SweepError(f"{path}: key {key!r} is given twice (as dashes and underscores)")
        base[name] = value
    if grid_raw is None:
        grid_raw = {}
    if not isinstance(grid_raw, dict):
        raise SweepError(f"{path}: grid must be a mapping of option: [values], got {type(grid_raw).__name__}")
    grid: dict[str, list[Any]] = {}
    for key, values in grid_raw.items():
        name = _known(path, key, "grid key ")
        if name in unhashed_options():
            raise SweepError(
                f"{path}: grid key {key!r} does not change results (it is not part of the run id), "
                f"so its cells would be one run; set it at the top level"
            )
        if name in grid:
            raise SweepError(f"{path}: grid key {key!r} is given twice (as dashes and underscores)")
        if name in base:
            raise SweepError(f"{path}: {key!r} is both a top-level option and a grid key; keep one")
        if not isinstance(values, list):
            raise SweepError(
                f"{path}: grid key {key!r} must be a list of values, got {type(values).__name__} "
                f"({values!r}); write {key}: [{values!r}] for a single value"
            )
        if not values:
            raise SweepError(f"{path}: grid key {key!r} is an empty list (an axis needs at least one value)")
        grid[name] = list(values)
    spec = SweepSpec(path=path, base=base, grid=grid, out=out)
    if spec.n_points > MAX_GRID_POINTS:  # before a cell is made: a few axes multiply fast
        sizes = " x ".join(str(len(v)) for v in grid.values())
        raise SweepError(
            f"{path}: the grid has {spec.n_points:,} points ({sizes}), more than the {MAX_GRID_POINTS:,} "
            f"a sweep may have; split it into several sweeps"
        )
    return spec


def load_sweep(path: str | Path) -> SweepSpec:
    """The sweep file ``path`` (:func:`engine.inputs.load_yaml`: bounded in size and aliases),
    checked by :func:`parse_sweep`; a SweepError naming the file otherwise."""
    if not Path(path).is_file():
        raise SweepError(f"{path}: no such sweep file")
    data = load_yaml(path, str(path), SweepError)
    return parse_sweep(data if data is not None else {}, str(path))


# ---------------------------------------------------------------------------------- cells
def _resolved(cfg: RunConfig) -> RunConfig:
    """``cfg`` with ``--backend auto`` resolved as the run will resolve it (:meth:`RunConfig.validate`),
    so the cell's run id and directory name are the id its run stores. Unresolvable: left as is
    (the cell's check reports it)."""
    try:
        return cfg.replace(backend=resolve_backend(cfg.sampling.backend, cfg.cluster.device))
    except UserError:
        return cfg


def cell_dir_name(cfg: RunConfig, run_id: str) -> str:
    """A cell's folder name: protocol, agents, rounds, density (when the cell reads one) and seed,
    then the hash of ``run_id`` (``sparse_n6_r3_d0.4_s1-1a2b3c4d5e``). The hash alone tells cells
    apart; the prefix is for people listing the folder."""
    parts = [cfg.experiment.protocol, f"n{cfg.experiment.agents}", f"r{cfg.experiment.rounds}"]
    density = cfg.value("density")
    if isinstance(density, (int, float)):
        parts.append(f"d{density:.4g}")
    parts.append(f"s{cfg.experiment.seed}")
    prefix = re.sub(r"[^A-Za-z0-9._-]+", "-", "_".join(parts))
    return f"{prefix}-{run_id.rsplit('-', 1)[-1]}"


def _cell_dir(out_dir: Path, cfg: RunConfig, run_id: str) -> Path:
    """``out_dir/<cell_dir_name>``, or ``out_dir/<run_id>`` where a sweep started before folder
    names (its cells named by run id alone) already wrote it, so that sweep resumes."""
    named = out_dir / cell_dir_name(cfg, run_id)
    old = out_dir / run_id
    return old if not named.exists() and old.is_dir() else named


def expand(spec: SweepSpec, out_dir: str | Path) -> list[Cell]:
    """The sweep's unique cells in grid order (the last grid key varies fastest), each with its
    normalised config, run id, directory ``out_dir/<name>`` (:func:`cell_dir_name`) and
    ``invalid`` status + error when it cannot run."""
    out_dir = Path(out_dir)
    cells: list[Cell] = []
    by_id: dict[str, Cell] = {}
    for values in itertools.product(*spec.grid.values()):
        point = dict(zip(spec.grid, values))
        data = {"reuse_first_round": True, **spec.base, **point}
        cfg = normalise(_resolved(config_from_mapping(data, source=spec.path)))
        run_id = cfg.run_id()
        if run_id in by_id:
            by_id[run_id].n_points += 1
            continue
        cell_out = _cell_dir(out_dir, cfg, run_id)
        cfg.output.out = str(cell_out)
        unused = unused_options(cfg)
        params = {k: cfg.value(k) for k in spec.grid if k not in unused}
        error = check_cell(cfg)
        cell = Cell(
            index=len(cells),
            params=params,
            config=cfg,
            run_id=run_id,
            out=cell_out,
            error=error,
            status="invalid" if error else "pending",
        )
        cells.append(cell)
        by_id[run_id] = cell
    for axis in spec.grid:
        if axis in PROTOCOL_OPTIONS and not any(axis in cell.params for cell in cells):
            raise SweepError(
                f"{spec.path}: grid key {axis!r} changes no cell: only {', '.join(option_readers(axis))} "
                f"read it, and no cell of this sweep does with its settings (see debate run --help)"
            )
    return cells


def disk_status(cell: Cell) -> tuple[str, dict[str, Any]]:
    """A valid cell's status from its directory: ``finished`` (run row finished and every
    question has a row), ``partial`` (some rows exist, or a part file cannot be read: the cell's
    run resumes and sets it aside, :mod:`engine.bad_parts`) or ``pending``; plus the run row's
    totals. Unreadable parts are left out with a logged warning (and the calls, graphs and
    prompts parts are checked by their footers only: a status reads no replies)."""
    if not cell.valid:
        return "invalid", {}
    if not cell.out.is_dir():
        return "pending", {}
    bad: list[str] = []
    runs = [
        r
        for r in read_table(cell.out, "runs", skip_bad_parts=True, notes=bad).to_pylist()
        if r["run_id"] == cell.run_id
    ]
    qids = {
        r["question_id"]
        for r in read_table(
            cell.out, "questions", ["run_id", "question_id"], skip_bad_parts=True, notes=bad
        ).to_pylist()
        if r["run_id"] == cell.run_id
    }
    bad += [f"{path}: unreadable Parquet part ({why})" for path, why in footer_problems(cell.out)]
    for line in bad:
        log.warning("%s; cell %s counts as partial: running it sets the part aside", line, cell.label)
    if runs and runs[0]["status"] == "finished" and len(qids) >= (runs[0]["n_questions"] or 0) and not bad:
        r = runs[0]
        return "finished", {
            "n_questions": r["n_questions"],
            "accuracy": r["accuracy"],
            "prompt_tokens": r["prompt_tokens"],
            "completion_tokens": r["completion_tokens"],
            "tokens": (r["prompt_tokens"] or 0) + (r["completion_tokens"] or 0),
            "cached_prompt_tokens": r.get("cached_prompt_tokens"),  # absent from runs rows before it
            "n_calls": r["n_calls"],
            "wall_s": r["wall_s"],
        }
    if runs or qids or bad:
        return "partial", {"questions_done": len(qids)}
    return "pending", {}


def refresh(cells: list[Cell]) -> None:
    """Set every valid cell's status (and result) from disk."""
    for c in cells:
        if c.valid:
            c.status, c.result = disk_status(c)


def manifest(spec: SweepSpec, cells: list[Cell], out_dir: str | Path) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for c in cells:
        counts[c.status] = counts.get(c.status, 0) + 1
    return {
        "sweep_file": spec.path,
        "out": str(out_dir),
        "updated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "base": spec.base,
        "grid": spec.grid,
        "grid_points": spec.n_points,
        "n_cells": len(cells),
        "counts": counts,
        "cells": [
            {
                "index": c.index,
                "run_id": c.run_id,
                "dir": c.out.name,
                "status": c.status,
                "params": c.params,
                "n_points": c.n_points,
                "error": c.error,
                **c.result,
            }
            for c in cells
        ],
        "across_seeds": across_seeds(cells),
    }


def across_seeds(cells: list[Cell]) -> list[dict[str, Any]]:
    """The finished cells that differ only in ``seed`` (:func:`engine.accounting.seed_groups`),
    aggregated: per group, its other params, the seeds, and accuracy and tokens as mean and
    sample sd over the seeds (2+ seeds only)."""
    done = [c for c in cells if c.status == "finished" and c.result and "seed" in c.params]
    out = []
    for members in seed_groups(done, lambda c: c.params):
        acc = mean_sd([c.result["accuracy"] for c in members])
        tok = mean_sd([c.result["tokens"] / max(1, c.result["n_questions"]) for c in members])
        out.append(
            {
                "params": json.loads(seed_key(members[0].params)),
                "seeds": [c.params["seed"] for c in members],
                "accuracy_mean": acc[0],
                "accuracy_sd": acc[1],
                "tokens_per_q_mean": tok[0],
                "tokens_per_q_sd": tok[1],
                "simulated": any(c.config.simulated for c in members),
            }
        )
    return out


def format_seeds(groups: list[dict[str, Any]]) -> list[str]:
    """One line per seed group (:func:`across_seeds`)."""
    lines = []
    for g in groups:
        label = " ".join(f"{k}={short_value(v)}" for k, v in g["params"].items()) or "(all cells)"
        lines.append(
            f"  {label}  over {len(g['seeds'])} seeds: accuracy {g['accuracy_mean']:.3f} ± "
            f"{g['accuracy_sd']:.3f}, tokens/question {g['tokens_per_q_mean']:,.0f} ± {g['tokens_per_q_sd']:,.0f}"
            + ("  (SIMULATED model)" if g.get("simulated") else "")
        )
    return (["across seeds (mean ± sd):"] + lines) if lines else []


def write_manifest(out_dir: str | Path, data: dict[str, Any]) -> Path:
    """Write ``out_dir/sweep.json`` atomically (temp file, then rename)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / MANIFEST
    tmp = out / f".{MANIFEST}.{uuid.uuid4().hex[:8]}.tmp"
    tmp.write_text(json.dumps(data, indent=2, default=str, sort_keys=False) + "\n")
    os.replace(tmp, path)
    return path


def format_cells(cells: list[Cell]) -> list[str]:
    """One line per cell: index, status, run id, params, and accuracy/tokens or the error."""
    lines = []
    for c in cells:
        extra = ""
        if c.status == "finished" and c.result:
            extra = f"  accuracy {c.result.get('accuracy') or 0:.3f}  tokens {c.result.get('tokens', 0):,}"
        elif c.status == "partial":
            extra = f"  {c.result.get('questions_done', 0)} questions done"
        elif c.error:
            extra = f"  {c.error}"
        dup = f" (x{c.n_points} grid points)" if c.n_points > 1 else ""
        lines.append(f"{c.index:>3}  {c.status:<9} {c.run_id:<18} {c.label}{dup}{extra}")
    return lines


# ---------------------------------------------------------------------------------- running
def run_sweep(
    spec: SweepSpec,
    out_dir: str | Path,
    runner=None,
    echo: Callable[[str], None] | None = None,
    progress: bool = True,
    ray_address: str | None = None,
) -> list[Cell]:
    """Run every valid, unfinished cell on one :class:`actors.driver.DebateRunner` (made here unless
    given; replicas and the first-round cache are kept across cells) and keep
    ``out_dir/sweep.json`` up to date. A cell whose run fails on bad input (e.g. a missing
    dataset) gets status ``error`` and the sweep goes on; so does one stopped by ``--max-error-rate``
    (status ``stopped``: its rows stay on disk, and running the sweep again resumes it) and one that
    another process is running (status ``busy``: several sweeps of one file may share a folder,
    each running the cells the others do not hold). Any other stopped run (an engine actor died,
    the writer could not write, Ctrl-C or SIGTERM, a bug) stops the sweep. ``progress=False``: no
    progress bar (callers that print their own). ``ray_address``: the Ray to join (``debate sweep
    --ray-address``; default the cells' ``ray_address``). ``out_dir`` must be a folder that can be
    written in (a SweepError naming it otherwise). Returns the cells."""
    # function-level: importing tqdm here keeps it off start-up
    from tqdm import tqdm

    out_dir = Path(out_dir)
    cells = expand(spec, out_dir)
    valid = [c for c in cells if c.valid]
    if not valid:
        first = cells[0].error if cells else "the grid is empty"
        raise SweepError(f"{spec.path}: no valid cell ({len(cells)} invalid); first: {first}")
    check_out_dir(out_dir, "--out", SweepError)
    refresh(cells)
    write = echo or tqdm.write

    def say(line: str) -> None:  # a line quotes the sweep file's values and errors: inert
        write(inert(line))

    def save() -> None:
        write_manifest(out_dir, manifest(spec, cells, out_dir))

    save()
    for c in cells:
        if not c.valid:
            say(f"sweep: skipping invalid cell {c.label}: {c.error}")
    done = sum(c.status == "finished" for c in valid)
    say(
        f"sweep {spec.path}: {len(cells)} cells from {spec.n_points} grid points "
        f"({len(cells) - len(valid)} invalid, {done} already finished) -> {out_dir}"
    )
    bar = progress_display(len(valid), initial=done, unit="cell", desc="sweep", disable=not progress)
    own = runner is None
    try:
        with stop_signals():
            for c in valid:
                if c.status == "finished":
                    continue
                if runner is None:  # made at the first unfinished cell: nothing to do, no Ray started
                    runner = DebateRunner(ray_address or c.config.cluster.ray_address)
                say(
                    f"[{done + 1}/{len(valid)}] start {c.run_id}  {c.label}"
                    + (" (resuming)" if c.status == "partial" else "")
                )
                if _run_cell(runner, c, save, functools.partial(_say_at, say, f"[{done}/{len(valid)}] ")):
                    done += 1
                    bar.update(1)
                    say(f"[{done}/{len(valid)}] {_done_line(c)}")
                    save()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM between two cells (a run's own is a RunInterrupted)
        raise RunInterrupted(
            f"interrupted: {done}/{len(valid)} cells finished in {out_dir}; run the same command to resume",
            exit_code(),
        ) from None
    finally:
        bar.close()
        if own and runner is not None:
            runner.shutdown()
        save()
    return cells


def _run_cell(runner, c: Cell, save: Callable[[], None], say: Callable[[str], None]) -> bool:
    """Run cell ``c`` on ``runner``; True when it finished. A cell that failed on its input, was
    stopped by ``--max-error-rate`` or is run by another process gets its status and error (said
    and saved); a run that was interrupted leaves the cell ``partial`` and raises."""
    was, c.status = c.status, "running"
    save()
    try:
        res = runner.run(c.config)
    except RunLocked as exc:  # another process runs this cell (a job array on one folder): next cell
        c.status, c.error, what = "busy", str(exc), "busy "
    except UserError as exc:  # bad input found at run time (dataset, model, ...): next cell
        log.warning("sweep cell %s (%s) failed on its input: %s", c.run_id, c.label, exc)
        c.status, c.error, what = "error", str(exc), "error"
    except ErrorRateExceeded as exc:  # too many errored calls in this cell: its rows stay, next cell
        log.warning("sweep cell %s (%s) stopped: %s", c.run_id, c.label, exc.rate_text)
        c.status, c.error, what = "stopped", exc.rate_text, "stopped"
    except (RunInterrupted, KeyboardInterrupt):
        c.status = "partial" if (was == "partial" or c.out.is_dir()) else "pending"
        raise
    else:
        s = res.summary
        c.status = "finished"
        c.result = {
            "n_questions": s["n_questions"],
            "accuracy": s["accuracy"],
            "prompt_tokens": s["prompt_tokens"],
            "completion_tokens": s["completion_tokens"],
            "tokens": s["prompt_tokens"] + s["completion_tokens"],
            "cached_prompt_tokens": s["cached_prompt_tokens"],
            "n_calls": s["n_calls"],
            "wall_s": res.wall_s,
            "resumed_questions": res.resumed,
        }
        return True
    say(f"{what} {c.run_id}  {c.label}: {c.error}")
    save()
    return False


def _say_at(say: Callable[[str], None], prefix: str, line: str) -> None:
    say(prefix + line)


def _done_line(c: Cell) -> str:
    """The line a sweep prints for a finished cell."""
    r = c.result
    cached = r["cached_prompt_tokens"]
    of_prompt = "" if cached is None else f", {cached:,} of the prompt tokens cached"
    return (
        f"done  {c.run_id}  {c.label}: accuracy {r['accuracy']:.3f}, tokens {r['tokens']:,} (prompt "
        f"{r['prompt_tokens']:,} + completion {r['completion_tokens']:,}{of_prompt}), {r['n_questions']} "
        f"questions ({r['resumed_questions']} resumed), {r['wall_s']:.1f} s"
    )


def print_plan(spec: SweepSpec, out_dir: str | Path) -> None:
    """``debate sweep --list``: every cell with its status and predicted calls, tokens, prompt
    tokens and computed prefill (:mod:`engine.plan`), the totals, and the mean ± sd over seeds of
    finished cells. Runs nothing, writes nothing."""

    cells = expand(spec, out_dir)
    refresh(cells)
    console = Console()  # the terminal's width; off a terminal $COLUMNS, else 80
    plans = plan_cells(cells)
    for line in header(cells, plans):
        console.print(line, markup=False, highlight=False)
    numbers = plan_table(cells, plans, labels=False)
    if console.measure(numbers).maximum + CELL_COLUMN <= console.width:
        console.print(plan_table(cells, plans))
    else:  # too narrow for a cell column beside the numbers: the cells in lines, then the numbers by index
        for line in cell_lines(cells, plans):
            console.print(inert(line), markup=False, highlight=False)
        console.print(numbers)
    for line in format_seeds(across_seeds(cells)):
        console.print(inert(line), markup=False, highlight=False)


def sweep_command(config: str, out: str | None, list_only: bool = False, ray_address: str | None = None) -> int:
    """``debate sweep``: 0 when every valid cell finished, 1 when a cell's run failed (bad
    input found at run time), stopped on ``--max-error-rate`` or was busy (run by another
    process); file errors raise
    :class:`SweepError` (exit status 2)."""
    spec = load_sweep(config)
    out_dir = out or spec.out
    if not out_dir:
        raise SweepError(f"{config}: no sweep directory: give --out DIR (or out: in the file)")
    if list_only:
        print_plan(spec, out_dir)
        return 0
    cells = run_sweep(spec, out_dir, ray_address=ray_address)
    print(inert("\n".join(format_cells(cells) + format_seeds(across_seeds(cells)))))
    print(inert(f"manifest: {Path(out_dir) / MANIFEST}"))
    return 1 if any(c.status in ("error", "stopped", "busy") for c in cells) else 0
