"""MkDocs hook (mkdocs.yml ``hooks:``): the docs site's reference pages, generated from the code
at every ``mkdocs build`` / ``mkdocs serve``, so they never go stale.

* ``reference/cli.md``     every ``debate`` subcommand and flag, from :func:`app.cli.build_parser`
* ``reference/config.md``  the YAML keys: every run option (:mod:`engine.options` ``Option``)
* ``reference/results.md`` the Parquet tables: :data:`engine.results.SCHEMAS` with
  :data:`engine.results.COLUMN_HELP`
* ``protocols/index.md`` and ``protocols/<name>.md``: the protocol registry
  (:data:`engine.protocols.SPECS`), each protocol module's docstring and options

:func:`pages` returns them all (path -> Markdown); ``on_files`` adds them to the build as
generated files (nothing is written into ``docs/``).
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `mkdocs` run from a checkout without the editable install
    sys.path.insert(0, str(ROOT))

from app.cli import build_parser, subcommands  # noqa: E402
from engine import kinds  # noqa: E402
from engine.config import PROTOCOL_OPTIONS, engine_options, option_readers  # noqa: E402
from engine.options import GROUPS, Option  # noqa: E402
from engine.protocols import SPECS  # noqa: E402
from engine.protocols.spec import ProtocolSpec  # noqa: E402
from engine.results import COLUMN_HELP, SCHEMAS  # noqa: E402

GENERATED_NOTE = (
    "!!! note\n    This page is generated from the code at every `mkdocs build` (`scripts/docs_hooks.py`); "
    "edit the code, not this page.\n"
)
OPTIONS = {**{o.name: o for o in engine_options()}, **PROTOCOL_OPTIONS}


def cell(text: Any) -> str:
    """``text`` safe inside a Markdown table cell: Markdown's special characters escaped, ``<``
    and ``>`` as entities, newlines as spaces."""
    out = str(text).replace("\\", "\\\\")
    for ch in "`*_[]|":
        out = out.replace(ch, "\\" + ch)
    return out.replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")


def para(text: str) -> str:
    """Plain text as a Markdown paragraph: ``<`` and ``>`` as entities (no HTML)."""
    return text.replace("<", "&lt;").replace(">", "&gt;")


def code(text: Any) -> str:
    """``text`` as inline code inside a table cell (``|`` escaped, the tables extension's rule),
    of class ``whole``: docs/stylesheets/extra.css keeps a flag, key or value on one line."""
    return "`" + str(text).replace("|", "\\|") + "`{.whole}"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# --- reference/cli.md ---------------------------------------------------------------------------


def _strip_default(help_text: str, opt: Option | None) -> str:
    """A run flag's help without the ``(default X)`` the CLI appends (the table has a column);
    a number's range stays (``(default 3; range [1, 10000])`` -> ``(range [1, 10000])``)."""
    if opt is not None:
        suffix = f" (default {opt.default_text})"
        if help_text.endswith(suffix):
            return help_text[: -len(suffix)]
        return help_text.replace(f" (default {opt.default_text}; range ", " (range ")
    return help_text


def _default(action: argparse.Action, command: str) -> str:
    opt = OPTIONS.get(action.dest) if command == "run" else None
    if opt is not None:
        return code(opt.default_text)
    if action.default in (None, False, argparse.SUPPRESS) or action.nargs == 0 and action.default is False:
        return ""
    if isinstance(action, argparse._CountAction) and action.default == 0:
        return ""
    return code(action.default)


def _action_row(action: argparse.Action, command: str) -> list[str]:
    names = action.option_strings or [action.metavar or action.dest]
    shown = ", ".join(code(n) for n in names)
    if action.option_strings and action.nargs != 0 and not isinstance(action, argparse.BooleanOptionalAction):
        metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
        if not action.choices:
            shown += " " + code(metavar)
    help_text = (action.help or "").replace("%%", "%")
    help_text = _strip_default(help_text, OPTIONS.get(action.dest) if command == "run" else None)
    choices = ", ".join(code(c) for c in action.choices) if action.choices else ""
    required = " (required)" if action.required and action.option_strings else ""
    return [shown, cell(help_text) + required, _default(action, command), choices]


def cli_page() -> str:
    parser = build_parser()
    out = [
        "# Command line: `debate`\n",
        GENERATED_NOTE,
        "Every `debate run` flag is also a YAML key of `--config FILE.yaml` (see [the YAML keys](config.md)); "
        "flags given on the command line win over the file. `debate --version` prints the version.\n",
    ]
    commands = subcommands(parser)
    out.append(
        table(
            ["command", "what it does"], [[f"[`debate {n}`](#debate-{n})", cell(_help_of(parser, n))] for n in commands]
        )
    )
    for name, sub in commands.items():
        out.append(f"\n## debate {name}\n")
        if isinstance(sub.formatter_class, type) and issubclass(
            sub.formatter_class, argparse.RawDescriptionHelpFormatter
        ):
            out.append("```text\n" + (sub.description or "").strip() + "\n```\n")
        else:
            out.append(para(sub.description or _help_of(parser, name)) + "\n")
        if name != "run":
            out.append("```text\n" + sub.format_usage().strip() + "\n```\n")
        for group in sub._action_groups:
            actions = [a for a in group._group_actions if not isinstance(a, argparse._HelpAction)]
            if not actions:
                continue
            title = group.title or ""
            if name == "run" or len([g for g in sub._action_groups if g._group_actions]) > 2:
                out.append(f"\n### {title}\n" if name == "run" else f"\n**{cell(title)}**\n")
                if group.description:
                    out.append(cell(group.description) + "\n")
            out.append("\n" + table(["flag", "meaning", "default", "choices"], [_action_row(a, name) for a in actions]))
    return "\n".join(out)


def _help_of(parser: argparse.ArgumentParser, name: str) -> str:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if choice.dest == name:
                    return choice.help or ""
    return ""


# --- reference/config.md ------------------------------------------------------------------------


def _type_name(opt: Option) -> str:
    names = [t.__name__ for t in (opt.type, *opt.also)]
    return " or ".join(names) + (" or null" if opt.default is None and opt.type is not dict else "")


def _meaning(opt: Option) -> str:
    """An option's help with its choices (``one of ...``) or its range (``range [1, 10000]``)."""
    choices = ", ".join(code(c) for c in opt.choices) if opt.choices else ""
    bounds = cell(f" (range {opt.range_text})") if opt.range_text else ""
    return cell(opt.help) + (f" (one of {choices})" if choices else "") + bounds


def _option_row(opt: Option, hashed: str) -> list[str]:
    flag = code(opt.flag) if opt.cli else "YAML only"
    return [code(opt.name), cell(_type_name(opt)), code(opt.default_text), flag, hashed, _meaning(opt)]


def config_page() -> str:
    header = ["key", "type", "default", "flag", "in run id", "meaning"]
    out = [
        "# Configuration: YAML keys\n",
        GENERATED_NOTE,
        "`debate run --config FILE.yaml` and a sweep file take these keys (`max_tokens` or `max-tokens`); "
        "each is also the flag `--name-with-dashes` unless marked *YAML only*. Flags given on the command "
        "line win over the file. Only flags: `--config`, `-v/--verbose`, `-q/--quiet`.\n",
        "**in run id**: whether the run id hashes the key. The run id names a run's results, so two runs "
        "with equal hashed keys are one run (the second resumes the first); unhashed keys change speed, "
        "memory or where output goes, not results.\n",
    ]
    for group, what in GROUPS.items():
        rows = [_option_row(o, "yes" if o.hashed else "no") for o in engine_options() if o.group == group]
        out.append(f"\n## {group}\n\n{cell(what)}\n\n" + table(header, rows))
    rows = []
    for name, opt in PROTOCOL_OPTIONS.items():
        readers = ", ".join(f"[{r}](../protocols/{r}.md)" for r in option_readers(name))
        hashed = "when read" if opt.hashed else "no"
        rows.append([*_option_row(opt, hashed)[:-1], _meaning(opt) + f" (read by {readers})"])
    out.append(
        "\n## protocol options\n\nRead only by some protocols. *when read*: the run id hashes the key when the "
        "run's protocol reads it; a sweep resets the others to their defaults, so equal runs share a run id.\n\n"
        + table(header, rows)
    )
    return "\n".join(out)


# --- reference/results.md -----------------------------------------------------------------------

_TABLE_WHAT = {
    "calls": "one row per LLM call",
    "questions": "one row per question",
    "graphs": "one row per call that read other agents' outputs (its information edges)",
    "runs": "one row per run (`OUT/runs/<run_id>.parquet`, rewritten at the end)",
    "answers": "written by `debate rescore` only: the current grader's reading of every agent call",
    "prompts": "one row per distinct prompt message of a run (`--store-prompts`, default on)",
}


def results_page() -> str:
    out = [
        "# Results: the Parquet tables\n",
        GENERATED_NOTE,
        "`--out DIR` holds one folder per table, each a set of Parquet part files written while the run "
        "goes (each atomically renamed into place). Rounds are numbered from 0. Read them with "
        "`engine.results.load(DIR)` (pandas DataFrames, de-duplicated, run options as columns), "
        "`debate export DIR --to FILE.parquet --table NAME`, or any Parquet reader.\n",
    ]
    for name, schema in SCHEMAS.items():
        rows = [[code(f.name), code(f.type), cell(COLUMN_HELP[name][f.name])] for f in schema]
        out.append(
            f"\n## {name}\n\n`OUT/{name}/`: {_TABLE_WHAT.get(name, '')}.\n\n"
            + table(["column", "Arrow type", "meaning"], rows)
        )
        if name == "calls":
            out.append(
                "\n`calls.kind`, the prompt stage of a call (`engine.kinds.KINDS`):\n\n" + kinds.markdown_table() + "\n"
            )
    return "\n".join(out)


# --- protocols/ ---------------------------------------------------------------------------------

_ROLE = re.compile(r":(?:func|class|mod|data|meth|attr|obj|exc):`~?([^`]+)`")
_LIST_ITEM = re.compile(r"^(\s*)([*-]|\d+\.)\s")


def rst_to_markdown(text: str) -> str:
    """A module docstring (RST-ish) as Markdown: ````x```` and ``:func:`x``` as `` `x` ``, a blank
    line before a list that follows a paragraph, ``::`` blocks and indented blocks outside lists
    as text blocks."""
    text = _ROLE.sub(lambda m: "`" + m[1] + "`", inspect.cleandoc(text))
    text = text.replace("``", "`")
    out: list[str] = []
    in_list = False
    block: list[str] = []

    def flush() -> None:
        if block:
            out.extend(
                ["", "```text", *[(b[2:] if b.startswith("  ") else b).replace("`", "") for b in block], "```", ""]
            )
            block.clear()

    for line in text.splitlines():
        if not line.strip():
            flush()
            in_list = False
            out.append("")
            continue
        if _LIST_ITEM.match(line):
            flush()
            if out and out[-1].strip() and not in_list:
                out.append("")
            in_list = True
            out.append(line)
        elif line.startswith("  ") and not in_list:
            block.append(line)
        else:
            flush()
            out.append(line.rstrip(":") + ":" if line.endswith("::") else line)
    flush()
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip() + "\n"


def _capabilities(spec: ProtocolSpec) -> list[tuple[str, str]]:
    return [
        ("report label", spec.label),
        ("prompt stages it adds", ", ".join(f"`{s}`" for s in spec.stages) or "none"),
        ("embedding actor", "when the config needs it" if spec.needs_embeddings is not _never_fn() else "never"),
        ("fixed graph (strong/weak `--placement`)", "yes" if spec.topology is not None else "no"),
        ("closed-form cost model (`engine.cost_predict`)", "yes" if spec.cost is not None else "no"),
        (
            "vote",
            "its own (re-computed by `debate rescore`)"
            if spec.revote is not None
            else "majority of the agents' answers",
        ),
        ("own config checks", "yes" if spec.check or spec.validate else "no"),
    ]


def _never_fn() -> Any:
    return ProtocolSpec.__dataclass_fields__["needs_embeddings"].default


def example_commands(name: str) -> str:
    """The example block of a protocol's page: its ``ProtocolSpec.example`` run on the simulated
    backend (seconds, no model) and on the default backend and model."""
    example = f"    {SPECS[name].example} \\\n" if SPECS[name].example else ""
    return (
        "```bash\n"
        "# seconds, no model: the engine's path and token counts, simulated answers\n"
        f"debate run --backend simulated --protocol {name} \\\n{example}    --limit 20 --out runs/{name}-sim\n"
        "# the default backend and model (vLLM where installed, the packaged SmolLM2)\n"
        f"debate run --protocol {name} \\\n{example}    --limit 10 --out runs/{name}\n"
        f"debate report runs/{name}\n"
        "```\n"
    )


def protocol_page(name: str) -> str:
    spec = SPECS[name]
    module = sys.modules[spec.run.__module__]
    out = [f"# {spec.label} (`--protocol {name}`)\n", f"**{cell(spec.help)}**\n", example_commands(name)]
    shared = [n for n, s in SPECS.items() if s.run.__module__ == spec.run.__module__ and n != name]
    if shared:
        out.append(
            f"The module `{spec.run.__module__}` implements {name} with "
            + ", ".join(f"[{n}]({n}.md)" for n in shared)
            + "; its description below covers all of them.\n"
        )
    out.append("## How it works\n\n" + rst_to_markdown(module.__doc__ or "(no description)"))
    out.append("\n## Options\n")
    if spec.settings:
        rows = [
            [code(o.flag) if o.cli else f"{code(o.name)} (YAML only)", code(o.default_text), cell(o.help)]
            for o in spec.settings
        ]
        out.append(
            "Besides the engine's own options ([all flags](../reference/cli.md)):\n\n"
            + table(["option", "default", "meaning"], rows)
        )
    else:
        out.append("None beyond the engine's own ([all flags](../reference/cli.md)).\n")
    out.append("\n## In the engine\n\n" + table(["capability", "value"], [[k, v] for k, v in _capabilities(spec)]))
    return "\n".join([*out, "\n" + GENERATED_NOTE])


def protocols_index() -> str:
    rows = []
    for name, spec in SPECS.items():
        opts = ", ".join(code(o.flag if o.cli else o.name) for o in spec.settings) or "none"
        rows.append([f"[{cell(spec.label)}]({name}.md)", code(name), cell(spec.help), opts])
    return "\n".join(
        [
            "# Protocols\n",
            "Pick one with `debate run --protocol NAME`; `debate protocols` prints this list. Each "
            "protocol's page has an example command.\n",
            table(["protocol", "`--protocol`", "what / paper", "options"], rows),
            "\n" + GENERATED_NOTE,
        ]
    )


def pages() -> dict[str, str]:
    """Every generated page: path under docs/ -> Markdown."""
    out = {
        "reference/cli.md": cli_page(),
        "reference/config.md": config_page(),
        "reference/results.md": results_page(),
        "protocols/index.md": protocols_index(),
    }
    out.update({f"protocols/{name}.md": protocol_page(name) for name in SPECS})
    return out


def on_files(files: Any, config: Any) -> Any:
    """MkDocs event: add the generated pages (in memory; a file of the same path in docs/ is replaced)."""
    from mkdocs.structure.files import File

    for path, text in pages().items():
        old = files.get_file_from_path(path)
        if old is not None:
            files.remove(old)
        files.append(File.generated(config, path, content=text))
    return files
