"""Agent-group actors (``--agents-per-actor``): many agents per Ray actor, call for call the same run.

Pure layout rules first (how many agents an actor hosts, which agents share one), then real runs
on Ray with the SIMULATED backend (deterministic per request seed): packing agents into fewer
processes must not change a single call, and the runs table must say which actor hosted whom.
"""

from __future__ import annotations

import json

import pytest

from actors.layout import AUTO_AGENT_ACTORS, agents_per_actor, pack_agents
from engine.config import ConfigError, RunConfig


@pytest.mark.parametrize(
    "setting, n, cpus, expected",
    [
        (1, 1000, 2, 1),  # asked for: one actor per agent
        (7, 10, 2, 7),
        (0, 2, 2, 1),  # auto: an actor per agent while there are few agents
        (0, AUTO_AGENT_ACTORS, 1, 1),
        (0, AUTO_AGENT_ACTORS + 1, 1, 2),
        (0, 128, 2, 64),  # ... then one per CPU of the cluster
        (0, 1000, 2, 500),
        (0, 16, 16, 1),
        (0, 128, 16, 8),
    ],
)
def test_agents_per_actor(setting, n, cpus, expected):
    assert agents_per_actor(setting, n, cpus) == expected


def test_pack_agents_keeps_a_replica_s_agents_together_in_agent_order():
    # agents 0..6 bound to replicas 0,1,0,1,0,1,0 (agent j -> replica j mod 2)
    assert pack_agents([0, 1, 0, 1, 0, 1, 0], 2) == [[0, 2], [4, 6], [1, 3], [5]]
    assert pack_agents([0, 1, 0, 1, 0, 1, 0], 1) == [[a] for a in (0, 2, 4, 6, 1, 3, 5)]
    assert pack_agents([0] * 5, 10) == [[0, 1, 2, 3, 4]]
    packs = pack_agents([i % 3 for i in range(1000)], 250)
    assert sorted(a for p in packs for a in p) == list(range(1000)) and max(map(len, packs)) == 250
    assert all(len({a % 3 for a in p}) == 1 for p in packs)  # one replica per actor


def test_agents_per_actor_is_checked_and_not_part_of_the_run_id():
    with pytest.raises(ConfigError, match=r"--agents-per-actor must be within \[0, 10000\]"):
        RunConfig.flat(agents_per_actor=-1).validate()
    assert RunConfig.flat(agents_per_actor=5).run_id() == RunConfig().run_id()


ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def runner(ray_local):  # the session's Ray (2 CPUs, no GPU), not one of this machine's size
    from actors.driver import DebateRunner

    with DebateRunner() as e:
        yield e


def sim(tmp_path, name: str, **kw) -> RunConfig:
    base = dict(
        protocol="sparse",
        topology="ring",
        agents=7,
        rounds=3,
        limit=3,
        seed=3,
        backend="simulated",
        replicas=2,
        progress=False,
        out=str(tmp_path / name),
    )
    base.update(kw)
    return RunConfig.flat(**base)


def calls_of(out) -> list[tuple]:
    from engine.results import read_table

    return sorted(
        (
            r["question_id"],
            r["round"],
            r["agent_id"],
            tuple(r["peers"]),
            r["seed"],
            r["text"],
            r["prompt_tokens"],
            r["completion_tokens"],
            r["answer"],
        )
        for r in read_table(out, "calls").to_pylist()
    )


def hosts(res) -> list[dict]:
    return [p for p in res.placement if p["role"] == "agents"]


@pytest.mark.ray
def test_packed_agents_make_exactly_the_calls_of_one_actor_per_agent(runner, tmp_path):
    alone = runner.run(sim(tmp_path, "alone", agents_per_actor=1))
    packed = runner.run(sim(tmp_path, "packed", agents_per_actor=3))
    auto = runner.run(sim(tmp_path, "auto"))
    assert alone.summary["n_calls"] == 7 * 3 * 3 and alone.summary["n_errors"] == 0
    assert calls_of(packed.out_dir) == calls_of(alone.out_dir) == calls_of(auto.out_dir)
    assert [h["agents"] for h in hosts(alone)] == [[0], [2], [4], [6], [1], [3], [5]]
    # agents on replica 0 (0, 2, 4, 6) and on replica 1 (1, 3, 5), three per actor at most
    assert [(h["agents"], h["replica"]) for h in hosts(packed)] == [([0, 2, 4], 0), ([6], 0), ([1, 3, 5], 1)]
    assert len({h["pid"] for h in hosts(packed)}) == 3 and all(h["node_id"] for h in hosts(packed))
    k = agents_per_actor(0, 7, ray.cluster_resources()["CPU"])  # 2 on a 2-core machine
    assert [h["agents"] for h in hosts(auto)] == pack_agents([a % 2 for a in range(7)], k)
    # the runs table records it, and the start-up / debate seconds
    from engine.results import read_table

    row = next(r for r in read_table(packed.out_dir, "runs").to_pylist())
    assert [p["agents"] for p in json.loads(row["placement"]) if p["role"] == "agents"] == [[0, 2, 4], [6], [1, 3, 5]]
    timings = json.loads(row["timings"])
    assert set(timings) == {"replicas_s", "agents_s", "debate_s"} and timings["debate_s"] > 0


@pytest.mark.ray
def test_agent_actors_are_reused_by_later_runs(runner, tmp_path):
    first = runner.run(sim(tmp_path, "a", agents_per_actor=2, replicas=1))
    second = runner.run(sim(tmp_path, "b", agents_per_actor=4, replicas=1))  # fewer actors: all reused
    assert [h["agents"] for h in hosts(second)] == [[0, 1, 2, 3], [4, 5, 6]]
    assert {h["pid"] for h in hosts(second)} <= {h["pid"] for h in hosts(first)}
    assert calls_of(first.out_dir) == calls_of(second.out_dir)
