"""Every file in examples/ runs as its header says: the sweeps plan (``--list``), the paper
config lists its runs, the endpoint config is a valid run configuration; README's sweep is the
example file itself."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.cli import main
from engine.config.flat import config_from_mapping, load_config_file
from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SWEEPS = {"sweep.yaml": 20, "placement.yaml": 6}  # the cells of each
CHECKED = {*SWEEPS, "paper_table.yaml", "openai.yaml"}


def test_every_example_is_checked_here():
    assert {p.name for p in EXAMPLES.iterdir() if p.is_file()} == CHECKED


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_a_sweep_example_plans_every_cell(name, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    out = tmp_path / "out"
    assert main(["sweep", str(EXAMPLES / name), "--out", str(out), "--list"]) == 0
    printed = capsys.readouterr().out
    assert not out.exists()  # --list writes nothing
    assert printed.count(" pending ") == SWEEPS[name] and "invalid" not in printed


def test_readme_sweep_is_the_example_file():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml title=\"sweep.yaml\"\n(.*?)```", readme, re.S)
    assert block is not None and block.group(1) == (EXAMPLES / "sweep.yaml").read_text(encoding="utf-8")


def test_the_placement_example_compares_central_and_peripheral(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    main(["sweep", str(EXAMPLES / "placement.yaml"), "--out", str(tmp_path / "o"), "--list"])
    printed = capsys.readouterr().out
    for where in ("central", "peripheral"):
        assert len(re.findall(rf"strong_agents={where} seed=\d", printed)) == 3


def test_the_paper_config_lists_the_sparse_papers_runs(capsys):
    config = str(EXAMPLES / "paper_table.yaml")
    assert load_script("reproduce_seeds").main(["--paper", "sparse", "--config", config, "--list"]) == 0
    printed = capsys.readouterr().out
    assert "sparse | Table" in printed and "Qwen/Qwen2.5-7B-Instruct" in printed


def test_the_endpoint_config_is_a_valid_run():
    path = EXAMPLES / "openai.yaml"
    cfg = config_from_mapping(load_config_file(path), str(path))
    assert cfg.sampling.backend == "openai" and cfg.experiment.protocol == "sparse" and cfg.n_agents == 6
    assert "api_key" not in path.read_text(encoding="utf-8")  # the key comes from the environment
