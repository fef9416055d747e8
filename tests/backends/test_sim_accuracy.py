"""Per-model ``--sim-accuracy`` (backends/simulated_backend.py: SimulatedSettings): the flag's
forms, its checks, run ids, and each simulated agent answering with its own model's accuracy."""

from __future__ import annotations

import pytest

from actors.layout import replica_options
from actors.local_run import run_local
from actors.replica_actor import make_backend
from app.cli import main
from backends.simulated_backend import SimulatedBackend, model_accuracy, parse_accuracy
from engine.config import ConfigError, RunConfig, config_from_mapping
from engine.tasks import arithmetic_questions

STRONG_WEAK = dict(backend="simulated", agents=6, rounds=2, models="big*1,small*5")


def test_forms_of_the_flag():
    assert parse_accuracy("0.6") == 0.6 and parse_accuracy("3/5") == 0.6
    assert parse_accuracy(" big = 0.8, small=2/5 ") == {"big": 0.8, "small": 0.4}
    cfg = config_from_mapping({"sim-accuracy": {"big": 0.8, "small": 0.4}, **STRONG_WEAK}).validate()
    assert cfg.value("sim_accuracy") == {"big": 0.8, "small": 0.4}
    assert RunConfig.flat(sim_accuracy="big=0.8,small=0.4", **STRONG_WEAK).validate().value(
        "sim_accuracy"
    ) == cfg.value("sim_accuracy")
    for bad, needle in (("x", "model=number pairs"), ("big=1,big=0", "given twice"), ("=1", "model=number")):
        with pytest.raises(ConfigError, match=needle):
            parse_accuracy(bad)


def test_a_number_keeps_its_run_ids():
    """The float form hashes as before (run ids taken on the branch before per-model accuracies)."""
    assert RunConfig.flat(backend="simulated", sim_accuracy="0.8").run_id() == "mad-729d8852f7"
    assert RunConfig.flat(backend="simulated", sim_accuracy=0.8).run_id() == "mad-729d8852f7"
    sparse = RunConfig.flat(backend="simulated", protocol="sparse", agents=6, density=0.4, sim_accuracy=0.35)
    assert sparse.run_id() == "sparse-8dae39ab5c"
    a = RunConfig.flat(sim_accuracy="big=0.8,small=0.4", **STRONG_WEAK).run_id()
    assert a != RunConfig.flat(sim_accuracy="big=0.8,small=0.5", **STRONG_WEAK).run_id()
    assert a == RunConfig.flat(sim_accuracy={"small": 0.4, "big": 0.8}, **STRONG_WEAK).run_id()


@pytest.mark.parametrize(
    "value, needle",
    [
        ("big=0.9", "gives no accuracy for small"),
        ("big=0.9,small=0.1,huge=1", "names huge, not a model of this run"),
        ("big=1.5,small=0", "big=1.5: an accuracy is a number within"),
    ],
)
def test_names_and_values_are_checked(value, needle):
    with pytest.raises(ConfigError, match=needle):
        RunConfig.flat(sim_accuracy=value, **STRONG_WEAK).validate()


def test_default_entry_and_plain_model():
    RunConfig.flat(sim_accuracy="big=0.9,default=0.2", **STRONG_WEAK).validate()  # small: the default
    RunConfig.flat(backend="simulated", model="m", sim_accuracy="m=0.9").validate()  # --model without --models
    assert model_accuracy({"big": 0.9, "default": 0.2}, "small") == 0.2 and model_accuracy(0.3, "x") == 0.3
    with pytest.raises(ValueError, match="no accuracy for model 'small'"):
        SimulatedBackend(model="small", accuracy={"big": 0.9})


def test_cli_error_is_one_line_naming_the_flag(capsys):
    argv = ["run", "--backend", "simulated", "--agents", "6", "--models", "big*1,small*5"]
    assert main([*argv, "--sim-accuracy", "big=1,tiny=0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--sim-accuracy" in err and "tiny" in err and "big, small" in err


@pytest.mark.parametrize("strong_agents", ["central", "peripheral"])
def test_each_agent_answers_with_its_models_accuracy(strong_agents):
    """big = 1.0, small = 0.0: in round 0 (no peers to follow) the strong agent is always right and
    the five weak ones always wrong; backends made as the driver makes each model's replicas."""
    cfg = RunConfig.flat(
        protocol="sparse", density=0.4, strong_agents=strong_agents, sim_accuracy="big=1,small=0", **STRONG_WEAK
    ).validate()
    _, options = replica_options(cfg, gpu=False)
    backends = {m: make_backend("simulated", m, options) for m in cfg.run_models()}
    models = [s.model for s in cfg.agent_specs()]
    assert sorted(models) == ["big"] + ["small"] * 5
    qs = arithmetic_questions(8, seed=1)
    for _, log in run_local(cfg, qs, backends):
        first = {r.agent_id: r.answer for r in log.records if r.round == 0}
        assert len(first) == 6
        for agent, answer in first.items():
            assert (answer == log.question.gold) == (models[agent] == "big")
