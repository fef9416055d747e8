"""The docs site and the commands the docs show.

* ``mkdocs build --strict`` succeeds (mkdocs.yml: every page in the nav, every link and anchor
  resolving), and the generated reference pages (scripts/docs_hooks.py) cover every flag, YAML
  key, results column and protocol.
* No dev-machine path (``/work/``, ``../shared``, ``/tmp/``) in README.md or docs/**/*.md.
* The ``debate`` commands of README.md and docs/**/*.md still work. The rule for which commands
  are checked, and how:

  - Only fenced blocks marked ``bash``, ``sh`` or ``shell`` are read. A line ending in ``\\`` is
    joined with the next; ``#`` comments are dropped (after being read for ``# sim``). A line is
    split at ``&&``, ``||``, ``;`` and ``|``, and a command is a part whose first word is
    ``debate`` or ``.venv/bin/debate`` (so ``bash scripts/setup.sh && .venv/bin/debate run``
    counts; a ``debate`` inside a quoted string, ``bash -lc "..."``, does not). Redirections
    (``>``, ``2>``) end it; a ``...`` word (an elision) is left out.
  - Every command is *parsed* with the real parser (:func:`app.cli.build_parser`): a renamed
    or removed flag, subcommand or choice in any doc fails.
  - A command is also *run* when it has ``--backend simulated``, or its line carries the comment
    ``# sim`` (for a command that reads what an earlier simulated run wrote: ``debate report
    runs/demo  # sim``). The run commands of one file run in the order they appear, in one
    temporary working directory shared by that file (relative ``--out`` folders land there; an
    absolute ``--out`` is moved under it); each must exit 0.
  - A fenced block with a file name, ```` ```yaml title="sweep.yaml" ```` (how Material shows a
    file's name), is written to that working directory under that name before the file's
    commands run, so ``debate sweep sweep.yaml`` runs the YAML the page shows. Such a sweep (or
    ``--config``) command runs when its file sets ``backend: simulated``; a ``debate show``,
    ``report`` or ``export`` command runs when it reads a folder an earlier running command of the
    same file wrote (its ``--out``).
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.needs import need_browser, need_mkdocs
from tests.support.paths import ROOT
from tests.support.scripts import load_script

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
_SHELLS = {"bash", "sh", "shell"}
_SPLIT = {"&&", "||", ";", "|", "&"}
_ENTRY = {"debate", ".venv/bin/debate"}


@dataclass(frozen=True)
class DocCommand:
    """One ``debate`` command of a doc: where it is, its arguments (after ``debate``), whether it runs."""

    where: str
    argv: tuple[str, ...]
    run: bool


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, line) of every shell line inside the bash/sh fences of ``text``, ``\\``
    continuations joined."""
    out: list[tuple[int, str]] = []
    fence: str | None = None
    shell = False
    pending: tuple[int, str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        match = _FENCE.match(line)
        if fence is None:
            if match:
                fence, shell = match[2], match[3].lower() in _SHELLS
            continue
        if match and match[2].startswith(fence) and not match[3]:
            fence = None
            continue
        if not shell:
            continue
        start, joined = pending if pending else (number, "")
        joined += line.strip()
        if joined.endswith("\\"):
            pending = (start, joined[:-1] + " ")
            continue
        pending = None
        out.append((start, joined))
    return out


def doc_commands(path: Path, name: str | None = None) -> list[DocCommand]:
    """The ``debate`` commands of one Markdown file (``name``: how to call it, default its path
    in the repository), by the rule of this module's docstring."""
    name = name or str(path.relative_to(ROOT))
    found = []
    for number, line in _logical_lines(path.read_text(encoding="utf-8")):
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
        lexer.whitespace_split = True
        lexer.commenters = ""
        try:
            words = list(lexer)
        except ValueError:  # an unbalanced quote: not a command line we can read
            continue
        comment_at = next((i for i, w in enumerate(words) if w.startswith("#")), len(words))
        marked = " ".join(words[comment_at:]).lstrip("#").split()[:1] == ["sim"]
        words = words[:comment_at]
        parts: list[list[str]] = [[]]
        for word in words:
            if word in _SPLIT:
                parts.append([])
            else:
                parts[-1].append(word)
        for part in parts:
            if not part or part[0] not in _ENTRY:
                continue
            argv = []
            for word in part[1:]:
                if word in {">", ">>", "<"} or re.fullmatch(r"\d?>>?", word):
                    break
                if word != "...":
                    argv.append(word)
            run = "--backend" in argv and argv[argv.index("--backend") + 1 :][:1] == ["simulated"]
            run = run or "--backend=simulated" in argv or marked
            found.append(DocCommand(f"{name}:{number}", tuple(argv), run))
    return found


_TITLE = re.compile(r'title="([\w.-]+)"')


def doc_files(path: Path) -> dict[str, str]:
    """The fenced blocks of ``path`` that carry a file name (```` ```yaml title="x.yaml" ````): name -> text."""
    files: dict[str, str] = {}
    fence: str | None = None
    name: str | None = None
    lines: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _FENCE.match(line)
        if fence is None:
            if match:
                fence, title = match[2], _TITLE.search(line)
                name, lines = (title[1] if title else None), []
            continue
        if match and match[2].startswith(fence) and not match[3] and line.strip() == match[2]:
            if name:
                files[name] = "\n".join(lines) + "\n"
            fence = None
            continue
        lines.append(line)
    return files


def _simulated_file(argv: tuple[str, ...], files: dict[str, str]) -> bool:
    """``argv`` reads a file of the page (sweep YAML, ``--config``) that sets ``backend: simulated``."""
    named = [w for i, w in enumerate(argv) if (argv[0] == "sweep" and i == 1) or argv[i - 1 : i] == ("--config",)]
    return any(re.search(r"^backend:\s*simulated\b", files.get(n, ""), re.M) for n in named)


def with_followers(commands: list[DocCommand], files: dict[str, str]) -> list[DocCommand]:
    """``commands`` with ``run`` also set for a simulated file's sweep/config command and for a
    show/report/export command reading an earlier running command's ``--out``."""
    out: list[DocCommand] = []
    written: set[str] = set()
    for c in commands:
        run = c.run or _simulated_file(c.argv, files)
        if not run and c.argv[:1] in (("show",), ("report",), ("export",)):
            run = len(c.argv) > 1 and c.argv[1].rstrip("/") in written
        if run and "--out" in c.argv[:-1]:
            written.add(c.argv[c.argv.index("--out") + 1].rstrip("/"))
        out.append(DocCommand(c.where, c.argv, run))
    return out


ALL = [c for path in DOCS for c in with_followers(doc_commands(path), doc_files(path))]


def test_the_harness_reads_commands_continuations_comments_and_chains(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text(
        "text\n```bash\n"
        "bash scripts/setup.sh && .venv/bin/debate run --limit 10\n"
        "debate run --agents 3 \\\n    --rounds 2   # a comment --bogus\n"
        "debate report runs/demo > out.txt  # sim\n"
        'bash -lc "cd x && .venv/bin/debate run --out y"\n'
        "debate run --model M --replicas 8 ...  # elided\n"
        "debate run --backend simulated --limit 2 | tee log\n"
        "```\n```python\ndebate run --nope\n```\n```yaml\ndebate: 1\n```\n",
        encoding="utf-8",
    )
    doc.write_text(
        doc.read_text(encoding="utf-8") + '```yaml title="s.yaml"\nlimit: 2\n```\n```text\nnot a file\n```\n',
        encoding="utf-8",
    )
    assert doc_files(doc) == {"s.yaml": "limit: 2\n"}
    files = {"s.yaml": "backend: simulated\n", "r.yaml": "backend: vllm\n"}
    followed = with_followers(
        [
            DocCommand("x", ("sweep", "s.yaml", "--out", "runs/s"), False),
            DocCommand("x", ("sweep", "r.yaml", "--out", "runs/r"), False),
            DocCommand("x", ("report", "runs/s/"), False),
            DocCommand("x", ("show", "runs/r"), False),
            DocCommand("x", ("run", "--config", "s.yaml"), False),
        ],
        files,
    )
    assert [c.run for c in followed] == [True, False, True, False, True]
    got = [(c.argv, c.run) for c in doc_commands(doc, "x.md")]
    assert got == [
        (("run", "--limit", "10"), False),
        (("run", "--agents", "3", "--rounds", "2"), False),
        (("report", "runs/demo"), True),
        (("run", "--model", "M", "--replicas", "8"), False),
        (("run", "--backend", "simulated", "--limit", "2"), True),
    ]


def test_the_readme_commands_are_found():
    readme = [c for c in ALL if c.where.startswith("README.md:")]
    assert len(readme) >= 8, readme
    assert any(c.run for c in readme)  # README's `debate run --backend simulated --limit 20`


def _parse(argv: tuple[str, ...]) -> tuple[int, str]:
    """Exit status and stderr of the real parser on ``argv`` (0: it accepts them; nothing runs)."""
    from app.cli import parser_for

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser_for(argv).parse_args(list(argv))  # the parser debate's main builds for argv
        except SystemExit as exc:  # --help / --version exit 0; a bad flag exits 2
            return int(exc.code or 0), err.getvalue()
    return 0, ""


@pytest.mark.parametrize("command", ALL, ids=[c.where for c in ALL])
def test_every_doc_command_parses(command):
    code, err = _parse(command.argv)
    assert code == 0, f"{command.where}: debate {' '.join(command.argv)}\n{err}"


def test_the_parse_check_fails_on_a_removed_flag():
    assert _parse(("run", "--agents", "3"))[0] == 0
    code, err = _parse(("run", "--agnets", "3"))
    assert code == 2 and "--agnets" in err


def _runnable(argv: tuple[str, ...], cwd: Path) -> list[str]:
    argv = list(argv)
    for i, word in enumerate(argv[:-1]):
        if word == "--out" and argv[i + 1].startswith(("/", "~")):
            argv[i + 1] = str(cwd / argv[i + 1].lstrip("/~"))
    return argv


_RUN_FILES = sorted({c.where.rsplit(":", 1)[0] for c in ALL if c.run})


@pytest.mark.ray
@pytest.mark.slow  # about 4 min for every doc (each command starts Ray); CI runs it
@pytest.mark.parametrize("doc", _RUN_FILES)
def test_the_simulated_doc_commands_run(doc, tmp_path):
    for name, text in doc_files(ROOT / doc).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    for command in [c for c in ALL if c.run and c.where.rsplit(":", 1)[0] == doc]:
        argv = [sys.executable, "-m", "app.cli", *_runnable(command.argv, tmp_path)]
        proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{command.where}: debate {' '.join(command.argv)}\n{proc.stderr[-3000:]}"


# --- the site ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The whole site, built with warnings as errors (``mkdocs build --strict``)."""
    need_mkdocs()
    out = tmp_path_factory.mktemp("docs") / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.mark.slow  # the whole site built (seconds); README command 2 and CI build it with --strict too
def test_mkdocs_build_strict(site):
    """The whole site builds with warnings as errors: every page in the nav, links and anchors
    resolve, the hook's generated pages included. About 1-5 s."""
    for page in ("reference/cli", "reference/config", "reference/results", "protocols/cortex"):
        assert (site / page / "index.html").is_file(), page


@pytest.mark.slow  # a real browser opens every page of the built site
def test_every_docs_page_fits_a_laptop_screen(site):
    """At 1280 px (a laptop) no table or code block of any page runs off the right edge: wide
    tables fit or were split, long lines wrap (scripts/docs_fit.py, in headless Chromium)."""
    fit = load_script("docs_fit")
    need_browser()
    pages = fit.pages(site, [])
    over = {name: blocks for name, blocks in fit.measure(site, pages, 1280, 900, None).items() if blocks}
    assert len(pages) > 30 and not {n: b for n, b in over.items() if any(x["over"] > 2 for x in b)}, over


WHOLE = "{.whole}"  # the class docs_hooks.code() gives a table cell's code (extra.css keeps it on one line)


@functools.cache
def _hooks():
    """scripts/docs_hooks.py, the generator of the reference pages."""
    return load_script("docs_hooks")


def test_the_cli_reference_lists_every_subcommand_and_flag():
    from app.cli import build_parser, subcommands

    page = _hooks().cli_page()
    for name, sub in subcommands(build_parser()).items():
        assert f"\n## debate {name}\n" in page, name
        for action in sub._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}`" in page, (name, flag)


def test_the_config_reference_lists_every_option_with_its_default():
    from engine.config import ENGINE_OPTIONS, PROTOCOL_OPTIONS

    page = _hooks().config_page().replace(WHOLE, "")
    rows = {line.split(" | ")[0].strip("| `"): line for line in page.splitlines() if line.startswith("| `")}
    for opt in [*ENGINE_OPTIONS, *PROTOCOL_OPTIONS.values()]:
        assert opt.name in rows, opt.name
        assert f"`{opt.default_text}`" in rows[opt.name], opt.name
        assert ("YAML only" in rows[opt.name]) == (not opt.cli), opt.name


def test_every_results_column_is_described_on_the_results_page():
    from engine.results import SCHEMAS

    page = _hooks().results_page().replace(WHOLE, "")
    for table, schema in SCHEMAS.items():
        section = page.split(f"\n## {table}\n", 1)[1].split("\n## ", 1)[0]
        for field in schema:
            assert f"| `{field.name}` | `{field.type}` |" in section, (table, field.name)


def test_a_page_per_protocol():
    from engine.protocols import SPECS

    pages = _hooks().pages()
    for name, spec in SPECS.items():
        page = pages[f"protocols/{name}.md"]
        assert f"`--protocol {name}`" in page
        for opt in spec.settings:
            assert f"`{opt.flag if opt.cli else opt.name}`" in page, (name, opt.name)
        assert f"[{spec.label}]({name}.md)" in pages["protocols/index.md"]


def test_each_protocol_page_opens_with_what_it_is_and_commands_that_configure_a_valid_run():
    """A protocol's page begins with its one line and an example block (the simulated run, the
    real one, the report), the generated-page note at the end; every ``debate run`` line of the
    block parses with the CLI's own parser into a run that ``debate sweep --list`` would accept."""
    import shlex

    from app.cli import build_parser, parse_run_config
    from app.sweep import check_cell
    from engine.protocols import SPECS

    pages = _hooks().pages()
    for name, spec in SPECS.items():
        page = pages[f"protocols/{name}.md"]
        head = page.split("## How it works")[0]
        assert "generated from the code" not in head and page.rstrip().endswith("edit the code, not this page."), name
        block = re.search(r"```bash\n(.*?)```", head, re.S)
        assert block is not None, name
        runs = [ln for ln in block.group(1).replace("\\\n", " ").splitlines() if ln.startswith("debate run ")]
        assert len(runs) == 2 and "--backend simulated" in runs[0] and f"--protocol {name}" in runs[1], runs
        for line in runs:
            argv = shlex.split(line)[1:]
            cfg = parse_run_config(build_parser().parse_args(argv))
            assert cfg.experiment.protocol == name and check_cell(cfg) is None, (line, check_cell(cfg))
            assert spec.example in line


def test_docstrings_become_markdown():
    md = _hooks().rst_to_markdown(
        "Title line.\n\nSee :func:`engine.x.f` and ``--tau``:\n* one\n  two\n* three\n\nSteps:\n"
        "  step 1  do ``a``\n  step 2  do b\n\nEnd."
    )
    assert "`engine.x.f`" in md and not re.search(r"(?<!`)``(?!`)", md) and ":func:" not in md
    assert "`--tau`:\n\n* one\n  two\n* three" in md  # a blank line before the list
    assert "```text\nstep 1  do a\nstep 2  do b\n```" in md  # an indented block outside a list


# --- no dev-machine paths ------------------------------------------------------------------------

_DEV_PATHS = re.compile(r"/work/|\.\./shared|/tmp/")
# (file, text) allowed for now; each entry says why. README.md is being rewritten: its `../shared`
# mentions (this machine's data folder) go with that rewrite, and then this entry goes too.
_ALLOWED: set[tuple[str, str]] = set()  # (file, text) pairs allowed to name a dev path


def test_no_dev_machine_paths_in_docs():
    bad = []
    for path in DOCS:
        name = str(path.relative_to(ROOT))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in _DEV_PATHS.finditer(line):
                if not any(name == f and line.find(text) == match.start() for f, text in _ALLOWED):
                    bad.append(f"{name}:{number}: {line.strip()[:100]}")
    assert not bad, "dev-machine paths in the docs:\n" + "\n".join(bad)


def test_citation_file_loads_and_names_the_packages_version_and_license():
    import tomllib

    import yaml

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert cff["cff-version"] == "1.2.0" and cff["title"] == project["name"]
    assert str(cff["version"]) == project["version"] and cff["license"] == project["license"]
    assert "Apache License" in (ROOT / "LICENSE").read_text(encoding="utf-8")[:200]
