"""The command line guides: ``--version``, grouped ``run --help`` with every default,
``debate protocols``, "did you mean" for flags, choices and YAML keys, a warning for an option
the run does not read, and bad input reported before Ray or torch is imported."""

import json
import logging
import os
import re
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

from app.cli import _add_run_flags, _Parser, build_parser, main, parse_run_config, parser_for, subcommands
from app.sweep import unread_given
from engine.config import ENGINE_OPTIONS, PROTOCOL_OPTIONS, RunConfig
from engine.options import GROUPS, Option
from engine.plan import Planner
from engine.protocols import SPECS

ROOT = Path(__file__).resolve().parents[2]


def _exit(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_version_is_the_installed_packages(capsys):
    code, out, _ = _exit(capsys, ["--version"])
    try:
        expected = f"debate {version('debate-engine')}"
    except PackageNotFoundError:  # a checkout on PYTHONPATH, never installed (a carried-in copy)
        expected = "debate (version unknown: not installed)"
    assert code == 0 and out.strip() == expected


def _sections(help_text: str) -> dict[str, str]:
    """``run --help`` split at its section titles (lines ending in ':' at column 0)."""
    parts = re.split(r"^(\S[^\n]*):\n", help_text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def _run_help(monkeypatch, capsys) -> str:
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = _exit(capsys, ["run", "--help"])
    assert code == 0
    return out


def test_run_help_lists_options_by_group_and_protocol(monkeypatch, capsys):
    sections = _sections(_run_help(monkeypatch, capsys))
    titles = [t for t in sections if t in GROUPS]
    assert titles == list(GROUPS)  # every group, in the declared order
    for opt in ENGINE_OPTIONS:
        if opt.cli:
            assert re.search(rf"^\s+{opt.flag}(?=[\s,])", sections[opt.group], flags=re.M), (opt.name, opt.group)
            others = [t for t in GROUPS if t != opt.group]
            assert not any(re.search(rf"^\s+{opt.flag}(?=[\s,])", sections[t], flags=re.M) for t in others)
    listed: dict[str, str] = {}  # option -> the protocol section listing it
    for name, spec in SPECS.items():
        own = [o for o in spec.settings if o.cli]
        if not own:
            assert f"--protocol {name}" not in sections
            continue
        body = sections[f"--protocol {name}"]
        for opt in own:  # listed under the first protocol reading it; later ones name it
            if opt.name in listed:  # also reads --forgetting, --memory (under mad)
                under = rf"{opt.flag}(, --[\w-]+)* \(under {listed[opt.name]}\)"
                assert re.search(under, " ".join(body.split())), (name, opt.name)
            else:
                assert re.search(rf"^\s+{opt.flag}(?=[\s,])", body, flags=re.M), (name, opt.name)
                listed[opt.name] = name
    assert set(listed) == {o.name for o in PROTOCOL_OPTIONS.values() if o.cli}


def _by_flag(help_text: str) -> dict[str, str]:
    """``run --help``'s entry of each flag, on one line."""
    entries = re.split(r"\n  (?=-)", help_text.split("\n\n", 2)[2])
    return {e.split()[0].rstrip(","): " ".join(e.split()) for e in entries if e.startswith("--")}


def test_run_help_shows_every_default(monkeypatch, capsys):
    by_flag = _by_flag(_run_help(monkeypatch, capsys))
    for opt in (*ENGINE_OPTIONS, *PROTOCOL_OPTIONS.values()):
        if opt.cli:
            assert re.search(r"\(default|default[);:]", by_flag[opt.flag]), by_flag[opt.flag]
    assert (
        "(default 3; range [1, 10000])" in by_flag["--agents"] and "(default 2; range [1, 100])" in by_flag["--rounds"]
    )
    assert "(default mad)" in by_flag["--protocol"] and "(default arithmetic)" in by_flag["--dataset"]
    assert "(default 0.4; range [-1, 1])" in by_flag["--tau"] and "(default on)" in by_flag["--filter"]


def test_an_engine_option_group_must_be_a_declared_one():
    with pytest.raises(TypeError, match="group must be one of"):
        Option("x", int, 1, group="misc")
    assert all(o.group in GROUPS for o in ENGINE_OPTIONS)


def test_protocols_lists_name_paper_and_options_with_defaults(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["protocols"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") == 4}
    assert set(SPECS) <= set(rows)
    assert "Du et al. 2023" in rows["mad"] and "Li et al. 2024" in rows["sparse"]
    assert "--tau (0.4)" in out and "--density (none)" in out and "--filter (on)" in out


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["run", "--agnets", "3"], "unrecognized arguments: --agnets 3 (did you mean --agents?)"),
        (["run", "--max-tokns=9"], "(did you mean --max-tokens?)"),
        (["run", "--protocol", "sprase"], "invalid choice: 'sprase' (did you mean 'sparse'?)"),
        (["run", "--zzzzzz"], "unrecognized arguments: --zzzzzz (see debate run --help)"),
        (["report", "x", "--basline", "mad"], "(did you mean --baseline?)"),
    ],
)
def test_a_mistyped_flag_or_choice_names_the_closest(capsys, argv, needle):
    code, _, text = _exit(capsys, argv)
    assert code == 2 and needle in text and len(text.strip().splitlines()) == 1, text


def test_a_mistyped_yaml_key_is_one_line_with_the_closest(capsys, tmp_path):
    bad = tmp_path / "my.yaml"
    bad.write_text("protocol: mad\nagnets: 3\n")
    assert main(["run", "--config", str(bad)]) == 2
    text = capsys.readouterr().err.strip()
    assert text == f"debate: error: --config {bad}: unknown key 'agnets' (did you mean 'agents'?)"


def _parse(argv):
    p = _Parser(prog="debate run")
    _add_run_flags(p)
    return parse_run_config(p.parse_args(argv))


def test_an_option_the_run_does_not_read_is_a_warning(caplog, tmp_path):
    caplog.set_level(logging.WARNING, logger="app.cli")
    _parse(["--protocol", "mad", "--tau", "0.3", "--backend", "simulated", "--sim-accuracy", "0.9"])
    assert [r.getMessage() for r in caplog.records] == [
        "--tau is ignored: --protocol mad does not read it here (read by s2mad)"
    ]
    caplog.clear()
    yml = tmp_path / "c.yaml"
    yml.write_text("protocol: cot\nagents: 5\nsim-accuracy: 0.9\n")
    _parse(["--config", str(yml), "--backend", "transformers"])
    assert [r.getMessage() for r in caplog.records] == [
        "--agents 5 is ignored: --protocol cot uses 1",
        "--sim-accuracy is ignored: only --backend simulated reads it (this run: transformers)",
    ]
    caplog.clear()  # read here: no warning (tau with embedding similarity; defaults never warn)
    _parse(["--protocol", "s2mad", "--agents", "4", "--similarity", "embedding", "--tau", "0.3"])
    assert not [r for r in caplog.records if r.name == "app.cli"]


def test_unread_given_looks_only_at_the_options_given():
    cfg = _parse(["--protocol", "s2mad", "--agents", "4", "--backend", "simulated"])
    assert unread_given(cfg, ["agents", "tau"]) == [
        "--tau is ignored: --protocol s2mad does not read it here (read by s2mad)"
    ]
    assert unread_given(cfg, ["agents", "groups"]) == []


_FAST = """
import json, sys, time
t = time.perf_counter()
from app.cli import main
code = main(sys.argv[1:])
heavy = [m for m in ("ray", "torch", "vllm", "transformers", "networkx") if m in sys.modules]
print(json.dumps({"code": code, "heavy": heavy, "s": time.perf_counter() - t}))
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--density", "0.33", "--agents", "4", "--protocol", "sparse"],
        # a child process each (about a second): one in the inner loop, the data-file case in CI
        pytest.param(["run", "--dataset", "nosuch.jsonl"], marks=pytest.mark.slow),
    ],
)
def test_bad_config_or_data_fail_before_heavy_imports(argv):
    proc = subprocess.run([sys.executable, "-c", _FAST, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["code"] == 2 and out["heavy"] == [], (out, proc.stderr)
    assert proc.stderr.startswith("debate: error:")


def test_a_missing_model_folder_is_one_line_before_heavy_imports(tmp_path):
    """``models/NAME`` with a ``models/`` folder here but no ``NAME`` in it is a mistyped path, not
    a hub id: one line naming it, before Ray, torch or the hub client is imported."""
    (tmp_path / "models").mkdir()
    argv = ["run", "--model", "models/Qwen2.5-7B-Instruct", "--backend", "transformers"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _FAST, *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["code"] == 2 and out["heavy"] == [], (out, proc.stderr)
    assert proc.stderr == (
        f"debate: error: --model models/Qwen2.5-7B-Instruct: no such folder "
        f"({tmp_path.resolve() / 'models' / 'Qwen2.5-7B-Instruct'})\n"
    )


def _help_at_80(monkeypatch) -> dict[str, list[str]]:
    """Each subcommand's ``--help`` lines at 80 columns."""
    monkeypatch.setenv("COLUMNS", "80")
    return {name: sub.format_help().splitlines() for name, sub in subcommands(build_parser()).items()}


def test_every_help_fits_80_columns(monkeypatch):
    helps = _help_at_80(monkeypatch)
    for name, lines in helps.items():
        assert max(map(len, lines)) <= 80, (name, max(lines, key=len))
    for name in ("run", "serve"):  # a hundred flags: one short usage line, not their listing
        assert helps[name][0].startswith(f"usage: debate {name} [") and helps[name][1] == "", helps[name][:2]
    assert len(helps["run"]) < 400  # 432 with the usage listing every flag


def _examples(lines: list[str], command: str) -> list[list[str]]:
    """The example command lines of a help (``  debate COMMAND ...``), without their ``(note)``."""
    shown = [line.strip().split("  (")[0] for line in lines if line.startswith(f"  debate {command} ")]
    return [example.split()[1:] for example in shown]


@pytest.mark.parametrize("command, flags", [("run", 2), ("sweep", 1)])
def test_run_and_sweep_help_show_examples_that_parse(monkeypatch, command, flags):
    examples = _examples(_help_at_80(monkeypatch)[command], command)
    assert len(examples) >= 2
    for argv in examples:
        parser = parser_for(argv)
        args, extra = parser.parse_known_args(argv)
        assert extra == [] and args.command == command, argv
    assert sum(len([w for w in argv if w.startswith("--")]) >= flags for argv in examples) >= 2


def test_sweep_help_shows_the_out_default(monkeypatch):
    text = " ".join(" ".join(_help_at_80(monkeypatch)["sweep"]).split())
    assert "--out DIR sweep directory" in text and "(default: the file's out: key; one of the two is required)" in text


def _default_for(shown: str, protocol: str) -> str:
    """The value a shown default (``full; last for group``) gives ``protocol``."""
    first, *others = shown.split("; ")
    for other in others:
        value, _, protocols = other.partition(" for ")
        if protocol in protocols.split(", "):
            return value
    return first


def test_the_memory_default_shown_is_the_one_runs_use(monkeypatch, capsys):
    """``--memory`` left out is each protocol's own memory: --help and ``debate protocols`` show
    that, and a run without it is predicted as the one given it (the cost model and the
    protocols resolve it by the same rule, engine.protocols.shared.resolve_memory)."""
    by_flag = _by_flag(_run_help(monkeypatch, capsys))["--memory"]
    assert by_flag.endswith("(default full; last for group)") and "default none" not in by_flag
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["protocols"]) == 0
    assert capsys.readouterr().out.count("--memory (full; last for group)") == 4
    planner = Planner()
    for protocol in ("mad", "sparse", "probmad", "group"):
        flat = {"backend": "simulated", "protocol": protocol, "rounds": 3, "agents": 4, "limit": 2, "density": 0.5}
        unset = planner.plan(RunConfig.flat(**flat).validate()).per_question
        default = _default_for(PROTOCOL_OPTIONS["memory"].default_text, protocol)
        other = "last" if default == "full" else "full"
        assert unset == planner.plan(RunConfig.flat(**flat, memory=default).validate()).per_question, protocol
        assert unset != planner.plan(RunConfig.flat(**flat, memory=other).validate()).per_question, protocol
