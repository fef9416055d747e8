"""The command line guides: ``--version``, grouped ``run --help`` with every default,
``debate protocols``, "did you mean" for flags, choices and YAML keys, a warning for an option
the run does not read, and bad input reported before Ray or torch is imported."""

import json
import logging
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from app.cli import _add_run_flags, _Parser, main, parse_run_config
from app.sweep import unread_given
from engine.config import ENGINE_OPTIONS, PROTOCOL_OPTIONS
from engine.options import GROUPS, Option
from engine.protocols import SPECS

ROOT = Path(__file__).resolve().parents[2]


def _exit(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_version_is_the_installed_packages(capsys):
    code, out, _ = _exit(capsys, ["--version"])
    assert code == 0 and out.strip() == f"debate {version('debate-engine')}"


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
    listed: set[str] = set()
    for name, spec in SPECS.items():
        own = [o for o in spec.settings if o.cli]
        if not own:
            assert f"--protocol {name}" not in sections
            continue
        body = sections[f"--protocol {name}"]
        for opt in own:  # listed under the first protocol reading it; later ones name it
            if opt.name in listed:
                assert f"{opt.flag} (under " in " ".join(body.split())
            else:
                assert re.search(rf"^\s+{opt.flag}(?=[\s,])", body, flags=re.M), (name, opt.name)
                listed.add(opt.name)
    assert listed == {o.name for o in PROTOCOL_OPTIONS.values() if o.cli}


def test_run_help_shows_every_default(monkeypatch, capsys):
    text = _run_help(monkeypatch, capsys)
    entries = re.split(r"\n  (?=-)", text.split("\n\n", 2)[2])  # one entry per flag
    by_flag = {e.split()[0].rstrip(","): " ".join(e.split()) for e in entries if e.startswith("--")}
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
