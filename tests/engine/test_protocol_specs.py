"""One ProtocolSpec per protocol, read by config, CLI, prompts, sweeps, driver, report and cost
model: a new protocol is one spec in the registry (engine/protocols/__init__.py)."""

from __future__ import annotations

import pytest

from engine.config import ConfigError, RunConfig
from engine.protocols import SPECS, ProtocolSpec
from engine.protocols.base import AgentCall, Context, Outcome, ProtocolGen, Step, vote
from engine.protocols.s2mad import TAU


def test_every_protocol_has_a_spec_and_its_help():
    from engine.config import engine_option

    assert list(SPECS) == [
        "cot",
        "sc",
        "mad",
        "sparse",
        "probmad",
        "group",
        "s2mad",
        "cortex",
        "reconcile",
        "chateval",
        "prd",
    ]
    for name, spec in SPECS.items():
        assert spec.name == name and spec.help and spec.label and spec.cost is not None
    assert "debate protocols" in engine_option("protocol").help  # its table shows each spec's help


def _echo(ctx: Context) -> ProtocolGen:
    """A made-up protocol: every agent answers, then every agent reads agent 0 only."""
    replies = yield Step(0, [AgentCall(i, "first") for i in range(ctx.n_agents)])
    history = [[r.answer for r in replies]]
    replies = yield Step(
        1,
        [
            AgentCall(i, "echo", peers=[0], peer_texts=[(0, replies[0].text)], peer_answers=[replies[0].answer])
            for i in range(ctx.n_agents)
        ],
    )
    history.append([r.answer for r in replies])
    return Outcome(vote(ctx, history[-1]), history)


def _check(cfg) -> None:
    if cfg.option(TAU) < 0:
        raise ConfigError("--tau must be >= 0 with --protocol echo")


ECHO = ProtocolSpec(
    "echo",
    _echo,
    "everyone reads agent 0",
    "Echo",
    settings=(TAU,),
    check=_check,
    shape=lambda cfg: (cfg.experiment.agents, 2),
    stages={"echo": "Agent 0 said: $peers\nAgain: $question $format"},
    needs_embeddings=lambda cfg: False,
    cost=lambda s, n, rounds, q, c, **kw: ("echo-cost", n, rounds),
    label_parts=lambda cfg: [f"tau={cfg.get('tau')}"],
)


@pytest.fixture
def echo(monkeypatch):
    monkeypatch.setitem(SPECS, "echo", ECHO)
    return ECHO


def test_a_new_protocol_is_one_spec(echo):
    from actors.local_run import run_local
    from actors.prepare import needs_embeddings
    from app.sweep import normalise, unused_options
    from backends.simulated_backend import SimulatedBackend
    from engine import cost_predict
    from engine.prompts import PromptSet
    from engine.tasks import arithmetic_questions

    cfg = RunConfig.flat(protocol="echo", agents=3, rounds=5, backend="simulated", tau=0.3).validate()
    assert (cfg.n_agents, cfg.n_rounds) == (3, 2)  # its shape
    with pytest.raises(ConfigError, match="--tau must be >= 0 with --protocol echo"):
        RunConfig.flat(protocol="echo", tau=-0.5).validate()  # its own config check
    with pytest.raises(ConfigError, match=r"--tau must be within \[-1, 1\]"):
        RunConfig.flat(protocol="echo", tau=2.0).validate()  # the option's declared bounds
    assert "echo" in PromptSet.for_task("numeric").templates  # its prompt stage, no import side effect
    assert "tau" not in unused_options(cfg) and "density" in unused_options(cfg)  # its options
    assert "tau" in unused_options(RunConfig.flat(protocol="mad"))
    assert normalise(cfg).experiment.rounds == 2
    assert not needs_embeddings(cfg)
    assert cost_predict.predict("echo", None, 3, 2, 10, 5) == ("echo-cost", 3, 2)
    rows = run_local(cfg, arithmetic_questions(3, seed=0), SimulatedBackend())
    assert all(row["protocol"] == "echo" and row["rounds_run"] == 2 and row["n_calls"] == 6 for row, _ in rows)
    assert all(rec.kind == "echo" for _, log in rows for rec in log.records if rec.round == 1)


def test_report_labels_and_cli_choices_come_from_the_specs(echo):
    from app.cli import main
    from app.report import RunData, base_label

    data = RunData(
        run_dir=None,
        run_id="echo-1",
        run={},
        config={"protocol": "echo", "agents": 3, "rounds": 5, "tau": 0.3},
        questions=[],
        calls=None,
    )
    assert base_label(data) == "echo 3x2 tau=0.3"
    with pytest.raises(SystemExit):  # argparse's choices were fixed at import: an unknown name is refused
        main(["run", "--protocol", "nope"])


# A made-up protocol with an option of its own, registered the way a new protocol module is (one
# SPECS entry) before the engine builds RunConfig; run in a fresh interpreter for that reason.
_NEW_OPTION = r"""
import argparse, json, sys
import engine.protocols as protocols
from engine.options import Option
from engine.protocols.base import AgentCall, Outcome, Step, vote
from engine.protocols.spec import ProtocolSpec

WEIGHT = Option("echo_weight", float, 0.5, "share of agents that read agent 0", low=0.0, high=1.0)

def echo(ctx):
    replies = yield Step(0, [AgentCall(i, "first") for i in range(ctx.n_agents)])
    readers = [i for i in range(ctx.n_agents) if i < round(ctx.cfg.option(WEIGHT) * ctx.n_agents)]
    replies = yield Step(1, [AgentCall(i, "debate", peers=[0], peer_texts=[(0, replies[0].text)],
                                       peer_answers=[replies[0].answer]) for i in readers])
    return Outcome(vote(ctx, [r.answer for r in replies]), [[r.answer for r in replies]])

protocols.SPECS["echo"] = ProtocolSpec("echo", echo, "some agents read agent 0", "Echo", settings=(WEIGHT,),
                                       shape=lambda cfg: (cfg.experiment.agents, 2))

from app import cli
from engine.config import ConfigError, RunConfig, config_from_mapping
from app.sweep import SweepError, expand, parse_sweep

out = {}
parser = argparse.ArgumentParser()
cli._add_run_flags(parser)
out["help"] = parser.format_help()
cfg = cli.parse_run_config(parser.parse_args(["--protocol", "echo", "--echo-weight", "0.25", "--agents", "4",
                                              "--backend", "simulated"]))
out["flag"] = cfg.option(WEIGHT)
out["yaml"] = config_from_mapping({"protocol": "echo", "echo-weight": 0.75}).option(WEIGHT)
try:
    RunConfig.flat(protocol="echo", echo_weight=2.0).validate()
except ConfigError as exc:
    out["bad"] = str(exc)
out["ids"] = [RunConfig.flat(protocol=p, echo_weight=w).run_id() for p in ("echo", "mad") for w in (0.25, 0.5)]
grid = parse_sweep({"backend": "simulated", "grid": {"protocol": ["echo", "mad"], "echo_weight": [0.25, 0.5]}})
out["cells"] = sorted(c.label for c in expand(grid, "/tmp/unused"))
try:
    expand(parse_sweep({"backend": "simulated", "grid": {"echo_weight": [0.25, 0.5]}}), "/tmp/unused")
except SweepError as exc:
    out["axis"] = str(exc)
from backends.simulated_backend import SimulatedBackend
from actors.local_run import run_local
from engine.tasks import arithmetic_questions
rows = run_local(cfg.validate(), arithmetic_questions(2, seed=0), SimulatedBackend())
out["calls"] = [row["n_calls"] for row, _ in rows]
print(json.dumps(out))
"""


def test_a_new_protocol_option_is_declared_once_in_its_spec():
    """RunConfig field, flag + help, YAML key, value check, run id, sweep axis and the protocol's
    own reading of it all come from one Option in the spec."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", _NEW_OPTION], cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    flat = " ".join(out["help"].split())  # under its protocol's section, with its default
    assert "--protocol echo: some agents read agent 0 --echo-weight" in flat
    assert "share of agents that read agent 0 (default 0.5; range [0, 1])" in flat
    assert out["flag"] == 0.25 and out["yaml"] == 0.75
    assert out["bad"] == "--echo-weight must be within [0, 1] (got 2.0)"
    echo_a, echo_b, mad_a, mad_b = out["ids"]
    assert echo_a != echo_b and mad_a == mad_b  # hashed where read, ignored by MAD
    assert out["cells"] == ["protocol=echo echo_weight=0.25", "protocol=echo echo_weight=0.5", "protocol=mad"]
    assert "grid key 'echo_weight' changes no cell: only echo read it" in out["axis"]
    assert out["calls"] == [4 + 1, 4 + 1]  # 4 first answers, then round(0.25 * 4) = 1 reader
