"""One ProtocolSpec per protocol, read by config, CLI, prompts, sweeps, driver, report and cost
model: a new protocol is one spec in the registry (engine/protocols/__init__.py)."""

from __future__ import annotations

import pytest

from engine.config import ConfigError, RunConfig
from engine.protocols import SPECS, ProtocolSpec
from engine.protocols.base import AgentCall, Context, Outcome, ProtocolGen, Step, vote


def test_every_protocol_has_a_spec_and_its_help():
    from engine.cli import _HELP

    assert list(SPECS) == ["cot", "sc", "mad", "sparse", "probmad", "group", "s2mad", "cortex"]
    for name, spec in SPECS.items():
        assert spec.name == name and spec.help and spec.label and spec.cost is not None
        assert f"{name}: {spec.help}" in _HELP["protocol"]


def _echo(ctx: Context) -> ProtocolGen:
    """A made-up protocol: every agent answers, then every agent reads agent 0 only."""
    replies = yield Step(0, [AgentCall(i, "first") for i in range(ctx.n_agents)])
    history = [[r.answer for r in replies]]
    replies = yield Step(1, [AgentCall(i, "echo", peers=[0], peer_texts=[(0, replies[0].text)],
                                       peer_answers=[replies[0].answer]) for i in range(ctx.n_agents)])
    history.append([r.answer for r in replies])
    return Outcome(vote(ctx, history[-1]), history)


def _check(cfg) -> None:
    if cfg.tau > 1:
        raise ConfigError("--tau must be at most 1 with --protocol echo")


ECHO = ProtocolSpec(
    "echo", _echo, "everyone reads agent 0", "Echo", options=frozenset({"tau"}), check=_check,
    shape=lambda cfg: (cfg.agents, 2), stages={"echo": "Agent 0 said: $peers\nAgain: $question $format"},
    needs_embeddings=lambda cfg: False, cost=lambda s, n, rounds, q, c, **kw: ("echo-cost", n, rounds),
    label_parts=lambda cfg: [f"tau={cfg.get('tau')}"])


@pytest.fixture
def echo(monkeypatch):
    monkeypatch.setitem(SPECS, "echo", ECHO)
    return ECHO


def test_a_new_protocol_is_one_spec(echo):
    from actors.backend_simulated import SimulatedBackend
    from actors.driver import needs_embeddings
    from actors.local_run import run_local
    from engine import cost_model
    from engine.prompts import PromptSet
    from engine.sweep import normalise, unused_options
    from engine.tasks import arithmetic_questions

    cfg = RunConfig(protocol="echo", agents=3, rounds=5, backend="simulated", tau=0.3).validate()
    assert (cfg.n_agents, cfg.n_rounds) == (3, 2)  # its shape
    with pytest.raises(ConfigError, match="--tau must be at most 1"):
        RunConfig(protocol="echo", tau=2.0).validate()  # its own config check
    assert "echo" in PromptSet.for_task("numeric").templates  # its prompt stage, no import side effect
    assert "tau" not in unused_options(cfg) and "density" in unused_options(cfg)  # its options
    assert "tau" in unused_options(RunConfig(protocol="mad"))
    assert normalise(cfg).rounds == 2
    assert not needs_embeddings(cfg)
    assert cost_model.predict("echo", None, 3, 2, 10, 5) == ("echo-cost", 3, 2)
    rows = run_local(cfg, arithmetic_questions(3, seed=0), SimulatedBackend())
    assert all(row["protocol"] == "echo" and row["rounds_run"] == 2 and row["n_calls"] == 6 for row, _ in rows)
    assert all(rec.kind == "echo" for _, log in rows for rec in log.records if rec.round == 1)


def test_report_labels_and_cli_choices_come_from_the_specs(echo):
    from engine.cli import main
    from engine.report import RunData, base_label

    data = RunData(run_dir=None, run_id="echo-1", run={}, config={"protocol": "echo", "agents": 3, "rounds": 5,
                                                                  "tau": 0.3}, questions=[], calls=None)
    assert base_label(data) == "echo 3x2 tau=0.3"
    with pytest.raises(SystemExit):  # argparse's choices were fixed at import: an unknown name is refused
        main(["run", "--protocol", "nope"])
