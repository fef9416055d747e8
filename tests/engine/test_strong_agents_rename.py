"""``--strong-agents`` (which agents get the strong models), formerly ``--placement``: the old
flag and YAML key still work with one warning, run ids did not change, and result folders
written under the old name read like new ones (load, export, report, show)."""

import json
import logging

import pytest

from app.cli import _add_run_flags, _Parser, main, parse_run_config
from app.report import load_runs, summary_rows
from app.sweep import expand, parse_sweep, unread_given
from app.transcript import debate_view
from engine.config import OLD_NAMES, ConfigError, RunConfig, config_from_mapping, stored_config
from engine.results import ParquetSink, load
from tests.support.result_dirs import config, full, write_run

# run ids computed before the rename (HEAD a8fa7d5, option then called "placement"): they must not move
STAR = {"protocol": "sparse", "topology": "star", "agents": 6, "models": "big*1,small*5", "backend": "simulated"}
CENTRAL_ID = "sparse-7c8f9be2e4"  # placement: central
PERIPHERAL_ID = "sparse-149b650966"  # placement: peripheral
DEFAULT_ID = "mad-1f113ed03c"  # RunConfig.flat(backend="simulated"): placement "none" by default
WARNING = "--placement is now --strong-agents; the old name still works"


def _parse(argv):
    p = _Parser(prog="debate run")
    _add_run_flags(p)
    return parse_run_config(p.parse_args(argv))


def _star_flags(*extra):
    return ["--protocol", "sparse", "--topology", "star", "--agents", "6", "--models", "big*1,small*5"] + [
        "--backend",
        "simulated",
        *extra,
    ]


def test_run_ids_of_before_the_rename_with_either_name():
    assert OLD_NAMES == {"placement": "strong_agents"}
    assert RunConfig.flat(**STAR, strong_agents="central").run_id() == CENTRAL_ID
    assert config_from_mapping({**STAR, "placement": "central"}).run_id() == CENTRAL_ID
    assert config_from_mapping({**STAR, "strong-agents": "peripheral"}).run_id() == PERIPHERAL_ID
    assert config_from_mapping({**STAR, "placement": "peripheral"}).run_id() == PERIPHERAL_ID
    assert RunConfig.flat(backend="simulated").run_id() == DEFAULT_ID  # every run hashes the default


def test_the_old_flag_works_with_one_warning_line(caplog):
    caplog.set_level(logging.WARNING)
    old = _parse(_star_flags("--placement", "central"))
    assert [r.getMessage() for r in caplog.records] == [WARNING]
    caplog.clear()
    new = _parse(_star_flags("--strong-agents", "central"))
    assert not caplog.records
    assert old == new and new.sampling.strong_agents == "central" and new.run_id() == CENTRAL_ID
    assert [s.model for s in old.agent_specs()] == ["big"] + ["small"] * 5  # the star's centre is agent 0


def test_the_old_yaml_key_works_with_one_warning_line(caplog, tmp_path):
    caplog.set_level(logging.WARNING)
    yml = tmp_path / "run.yaml"
    yml.write_text("".join(f"{k}: '{v}'\n" for k, v in STAR.items()).replace("'6'", "6") + "placement: peripheral\n")
    cfg = _parse(["--config", str(yml)])
    assert [r.getMessage() for r in caplog.records] == [
        f"--config {yml}: placement is now strong_agents; the old name still works"
    ]
    assert cfg.sampling.strong_agents == "peripheral" and cfg.run_id() == PERIPHERAL_ID
    caplog.clear()  # a flag given over the file wins, as for any option
    assert _parse(["--config", str(yml), "--strong-agents", "central"]).run_id() == CENTRAL_ID


def test_both_names_with_different_values_is_one_line(capsys, tmp_path):
    assert main(["run", *_star_flags("--placement", "central", "--strong-agents", "peripheral")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "debate: error: --placement 'central' and --strong-agents 'peripheral' are both given; "
        "keep --strong-agents (--placement is its old name)"
    )
    yml = tmp_path / "both.yaml"
    yml.write_text("placement: central\nstrong_agents: none\n")
    assert main(["run", "--config", str(yml)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"debate: error: --config {yml}: placement 'central' and strong_agents 'none' are both")
    assert len(err.splitlines()) == 1
    same = config_from_mapping({**STAR, "placement": "central", "strong_agents": "central"})  # agree: fine
    assert same.run_id() == CENTRAL_ID


def test_help_and_errors_name_the_new_flag(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = capsys.readouterr().out
    assert "--strong-agents {none,central,peripheral}" in text and "which agents get the stronger models" in text
    assert "--placement " not in text and "--placement-timeout" in text  # the old name is hidden
    with pytest.raises(ConfigError, match=r"^--strong-agents central needs --models"):
        RunConfig.flat(protocol="sparse", topology="star", agents=6, strong_agents="central").validate()


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["run", "--strong-agnets", "central"], "(did you mean --strong-agents?)"),
        (["run", "--placment", "central"], "(did you mean --placement, now --strong-agents?)"),
        (["run", "--placement", "centre"], "invalid choice: 'centre' (did you mean 'central'?)"),
    ],
)
def test_did_you_mean_knows_both_names(capsys, argv, needle):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    text = capsys.readouterr().err
    assert exc.value.code == 2 and needle in text, text


def test_a_mistyped_yaml_key_names_the_old_and_the_new_name(tmp_path, capsys):
    yml = tmp_path / "typo.yaml"
    yml.write_text("placment: central\n")
    assert main(["run", "--config", str(yml)]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("unknown key 'placment' (did you mean 'placement', now 'strong_agents'?)")
    )
    with pytest.raises(ConfigError, match=r"'strong_agent' is not a run option \(did you mean 'strong_agents'\?\)"):
        parse_sweep({"grid": {"strong_agent": ["central"]}}, "s.yaml")


def test_unread_given_reads_an_old_name_as_the_new_one():
    cfg = RunConfig.flat(**STAR, strong_agents="central")
    assert unread_given(cfg, ["placement", "strong-agents"]) == []  # read: no warning, no crash
    mad = RunConfig.flat(protocol="mad", backend="simulated")
    assert unread_given(mad, ["placement", "tau"]) == [
        "--tau is ignored: --protocol mad does not read it here (read by s2mad)"
    ]


def test_a_sweep_takes_the_old_name_with_one_warning(caplog, tmp_path):
    caplog.set_level(logging.WARNING)
    spec = parse_sweep({**STAR, "grid": {"placement": ["central", "peripheral"]}}, "s.yaml")
    assert spec.grid == {"strong_agents": ["central", "peripheral"]}
    assert [r.getMessage() for r in caplog.records] == [
        "s.yaml grid: placement is now strong_agents; the old name still works"
    ]
    cells = expand(spec, tmp_path)
    assert [c.run_id for c in cells] == [CENTRAL_ID, PERIPHERAL_ID]
    assert [c.params for c in cells] == [{"strong_agents": "central"}, {"strong_agents": "peripheral"}]
    top = parse_sweep({**STAR, "placement": "central", "grid": {"seed": [0]}}, "t.yaml")
    assert top.base["strong_agents"] == "central" and "placement" not in top.base
    with pytest.raises(ConfigError, match="both given"):
        parse_sweep({**STAR, "placement": "central", "strong-agents": "none"}, "u.yaml")


@pytest.fixture
def old_and_new(tmp_path):
    """Two runs of one label: written before the rename (config key ``placement``) and after."""
    root = tmp_path / "runs"
    q = [("q0", True, [1.0, 1.0], False, 1, 0, full(3, 2, 10, 5))]
    old = config("sparse", 3, 2, models="big*1,small*2", placement="central")
    write_run(ParquetSink(root / "old"), "sparse-old", old, q)
    new = config("sparse", 3, 2, models="big*1,small*2", strong_agents="peripheral")
    write_run(ParquetSink(root / "new"), "sparse-new", new, q)
    return root


def test_old_result_folders_read_under_the_new_name(old_and_new, tmp_path, capsys):
    assert stored_config({"placement": "central", "seed": 1}) == {"strong_agents": "central", "seed": 1}
    r = load(old_and_new)
    runs = r.runs.set_index("run_id")
    assert runs.strong_agents.to_dict() == {"sparse-old": "central", "sparse-new": "peripheral"}
    assert "config_placement" not in r.runs  # the runs table's own placement column is the Ray one
    assert set(r.questions.groupby("strong_agents").run_id.first()) == {"sparse-old", "sparse-new"}
    out = tmp_path / "runs.csv"
    assert main(["export", str(old_and_new), "--to", str(out), "--table", "runs"]) == 0
    assert "strong_agents" in out.read_text().splitlines()[0].split(",")
    rows = {row["run_id"]: row for row in summary_rows(load_runs(old_and_new))}
    assert rows["sparse-old"]["label"].endswith("strong_agents=central (SIMULATED)")
    assert rows["sparse-new"]["label"].endswith("strong_agents=peripheral (SIMULATED)")
    assert debate_view(r, "sparse-old", "q0").options["strong_agents"] == "central"
    assert debate_view(r, "sparse-new", "q0").options["strong_agents"] == "peripheral"
    assert json.loads(RunConfig.flat(**STAR, strong_agents="central").to_json())["strong_agents"] == "central"
