"""``debate serve``: replicas kept on the cluster and reused by later runs (actors/serve.py, actors/served.py)."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import time

import pytest

from actors import serve, served
from actors.driver import run
from actors.served import Served, choose, differences, served_name
from engine.config import RunConfig
from engine.results import read_table
from tests.support.paths import ROOT


def setup(**kw):
    base = {"backend": "simulated", "model": "m", "index": 0, "options": {"accuracy": 0.6}, "max_batch": 16}
    return {**base, **kw}


def test_a_served_name_is_its_setup():
    """Two setups share a name only when every setting is the same (the name is how a run finds a
    served replica); it starts with the backend, the model's last path part and the index."""
    name = served_name(setup(model="org/Model-1"))
    assert name.startswith("simulated-Model-1-r0-") and name == served_name(setup(model="org/Model-1"))
    others = [setup(max_batch=8), setup(index=1), setup(options={"accuracy": 0.7}), setup(backend="vllm")]
    assert len({served_name(s) for s in [setup(), *others]}) == 5


def test_a_run_takes_the_served_replica_of_its_setup_and_says_why_not_another():
    want = setup()
    same = Served(served_name(want), "handle", {"served": want})
    other = setup(max_batch=64, options={"accuracy": 0.6, "dtype": "float32"})
    differing = Served(served_name(other), "h2", {"served": other})
    assert choose(want, [differing, same]) == (same, f"reusing served replica {same.name} of m (replica 0)")
    found, line = choose(want, [differing])
    assert found is None and line == (
        f"served replica {differing.name} of m (replica 0) has max_batch 64, dtype float32; this run wants "
        "max_batch 16, dtype unset: starting its own"
    )
    silent = Served(served_name(want), "h3", None)  # dead or restarting: no info
    assert choose(want, [silent]) == (
        None,
        f"served replica {silent.name} of m (replica 0) does not answer: starting its own",
    )
    assert choose(want, [Served("x", "h", {"served": setup(model="other")})]) == (None, None)
    assert differences(want, want) == ([], [])


@pytest.fixture
def outside_ray(monkeypatch):
    """As a fresh ``debate`` process sees it: not connected to Ray, even where an earlier test of
    this session connected the test process (``ray_local``)."""
    import ray

    monkeypatch.setattr(ray, "is_initialized", lambda: False)


def test_serve_list_and_stop_without_a_ray_say_so_in_one_line(monkeypatch, capsys, no_ray, outside_ray):
    """Nothing to list or stop (no Ray runs here): one line, exit 0, no Ray started."""
    from app.cli import main

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(serve, "running_local_ray", lambda: None)
    for flag in ("--list", "--stop"):
        assert main(["serve", flag]) == 0
        out = capsys.readouterr().out.strip()
        assert out == "no Ray runs on this machine (nor --ray-address / RAY_ADDRESS): nothing is served"


def test_serve_at_an_address_where_nothing_listens_is_one_line(capsys, outside_ray):
    """Serving, listing or stopping at a ``--ray-address`` where no Ray answers: the run's one-line
    error (exit 2), before Ray starts."""
    from app.cli import main

    for flags in ([], ["--list"], ["--stop"]):
        assert main(["serve", *flags, "--backend", "simulated", "--ray-address", "127.0.0.1:9"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("debate: error: --ray-address 127.0.0.1:9: no Ray cluster answers there"), err
        assert len(err.splitlines()) == 1


def test_ray_address_auto_with_no_ray_here_is_one_line(monkeypatch):
    from ray._private import services

    from actors.driver import RayAddressError, check_ray_address

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(services, "find_bootstrap_address", lambda temp_dir: None)
    monkeypatch.setattr(services, "find_gcs_addresses", lambda: frozenset())
    with pytest.raises(RayAddressError, match=r"^--ray-address auto: no Ray runs on this machine; start one"):
        check_ray_address("auto")


def test_the_summary_names_the_served_replicas_a_run_used():
    from app.cli import served_rows

    class Result:
        placement = [{"role": "replica", "served": "simulated-m-r0-abc"}, {"role": "replica"}, {"role": "writer"}]

    assert served_rows(Result()) == [("served replicas used", "simulated-m-r0-abc")]
    Result.placement = [{"role": "replica"}]
    assert served_rows(Result()) == []


# ------------------------------------------------------------------------------ on Ray
def cfg(tmp_path, name, **kw) -> RunConfig:
    base = dict(backend="simulated", limit=4, agents=3, rounds=2, progress=False, out=str(tmp_path / name))
    return RunConfig.flat(**{**base, **kw})


@pytest.fixture
def serving(ray_local):
    """``serve(cfg)``, as ``debate serve`` does it in the session's Ray; every served replica is
    stopped afterwards. Yields the lines each call printed."""
    lines: list[str] = []

    def start(config: RunConfig) -> list[str]:
        assert serve.serve(config, echo=lines.append) == 0
        return lines

    yield start
    serve.stop_served(serve.served_replicas())


@pytest.fixture
def replica_starts(monkeypatch):
    """The replica actors the driver starts from now on (by model)."""
    import actors.driver
    from actors.replica_actor import ReplicaActor

    started: list[str] = []
    real = actors.driver.actor_class

    class Counting:
        def __init__(self, factory):
            self.factory = factory

        def options(self, **opts):
            starter = self.factory.options(**opts)

            class Starter:
                @staticmethod
                def remote(backend, model, *args, **kw):
                    started.append(model)
                    return starter.remote(backend, model, *args, **kw)

            return Starter

    monkeypatch.setattr(
        actors.driver, "actor_class", lambda cls: Counting(real(cls)) if cls is ReplicaActor else real(cls)
    )
    return started


@pytest.fixture
def driver_log():
    """The warnings and infos of actors.driver, as lines."""
    lines: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("actors.driver")
    old = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield lines
    logger.removeHandler(handler)
    logger.setLevel(old)


def answers(out) -> list[tuple]:
    calls = read_table(out, "calls").to_pylist()
    keys = ("question_id", "round", "agent_id", "kind", "seed", "text", "answer", "prompt_tokens", "completion_tokens")
    return sorted(tuple(c[k] for k in keys) for c in calls)


@pytest.mark.ray
def test_a_run_reuses_a_served_replica_writes_the_same_and_leaves_it_running(
    tmp_path, serving, replica_starts, driver_log
):
    own = run(cfg(tmp_path, "own"))
    assert len(replica_starts) == 1
    lines = serving(cfg(tmp_path, "unused"))
    [replica] = serve.served_replicas()
    assert lines[0].startswith(f"{replica.name}: ") and "started in" in lines[0], lines
    assert "--ray-address" in lines[-1]
    again = run(cfg(tmp_path, "reused"))
    assert len(replica_starts) == 2  # serve's; the run started none
    assert f"reusing served replica {replica.name} of {replica.setup['model']} (replica 0)" in driver_log
    assert [p.get("served") for p in again.placement if p["role"] == "replica"] == [replica.name]
    assert answers(again.out_dir) == answers(own.out_dir) and len(answers(own.out_dir)) == 4 * 3 * 2
    [after] = serve.served_replicas()  # the run's end left it running, the same process
    assert after.name == replica.name and after.info["pid"] == replica.info["pid"]


@pytest.mark.ray
def test_a_served_replica_of_other_settings_is_left_and_the_run_starts_its_own(
    tmp_path, serving, replica_starts, driver_log
):
    serving(cfg(tmp_path, "unused", max_batch=8))
    [replica] = serve.served_replicas()
    res = run(cfg(tmp_path, "own", max_batch=4))
    assert len(replica_starts) == 2  # serve's and the run's own
    assert any(
        line.startswith(f"served replica {replica.name} of ")
        and line.endswith("has max_batch 8; this run wants max_batch 4: starting its own")
        for line in driver_log
    ), driver_log
    assert [p.get("served") for p in res.placement if p["role"] == "replica"] == [None]
    assert [s.name for s in serve.served_replicas()] == [replica.name]  # still served


@pytest.mark.ray
def test_serve_again_keeps_what_is_served_and_stop_ends_them(tmp_path, serving, replica_starts):
    serving(cfg(tmp_path, "a", model="m1"))
    lines = serving(cfg(tmp_path, "b", model="m1"))
    assert len(replica_starts) == 1 and lines[2].endswith("already served"), lines
    serving(cfg(tmp_path, "c", model="m2"))
    names = {s.setup["model"]: s.name for s in serve.served_replicas()}
    out: list[str] = []
    assert serve.stop_command(None, ["m1"], echo=out.append) == 0
    assert out == [f"stopped {names['m1']}: m1 replica 0"]
    assert [s.name for s in serve.served_replicas()] == [names["m2"]]
    out.clear()
    assert serve.stop_command(None, None, echo=out.append) == 0
    assert out == [f"stopped {names['m2']}: m2 replica 0"]  # the session's Ray was not debate serve's: it stays
    out.clear()
    assert serve.stop_command(None, None, echo=out.append) == 0
    assert out == ["nothing is served"]


@pytest.mark.ray
def test_a_served_replica_that_died_is_replaced_by_the_runs_own(tmp_path, serving, replica_starts, driver_log):
    import ray

    serving(cfg(tmp_path, "unused", max_restarts=0))
    [replica] = serve.served_replicas()
    ray.kill(replica.handle, no_restart=True)

    res = run(cfg(tmp_path, "own", max_restarts=0))
    assert len(replica_starts) == 2 and res.summary["n_questions"] == 4
    assert [p.get("served") for p in res.placement if p["role"] == "replica"] == [None]


@pytest.mark.ray
@pytest.mark.slow
def test_debate_serve_starts_a_ray_that_outlives_it_and_stop_ends_it(tmp_path):
    """The commands end to end: ``debate serve`` starts its own Ray head (none runs here), returns
    and leaves it with the replica; a run with ``--ray-address auto`` reuses it; ``--stop`` ends
    the replica and that Ray, whose processes are then gone."""
    import psutil

    temp = tempfile_dir()
    env = {**os.environ, "RAY_TMPDIR": temp, "COLUMNS": "250"}  # the summary's rows unshortened
    env.pop("RAY_ADDRESS", None)
    debate = [sys.executable, "-m", "app.cli"]
    model = ["--backend", "simulated", "--agents", "3", "--rounds", "2"]

    def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([*debate, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)

    try:
        up = cli("serve", *model)
        assert up.returncode == 0, up.stderr[-2000:]
        name = up.stdout.split(":", 1)[0]
        start = time.perf_counter()
        ran = cli("run", *model, "--limit", "4", "--out", str(tmp_path / "run"), "--ray-address", "auto")
        took = time.perf_counter() - start
        assert ran.returncode == 0, ran.stderr[-2000:]
        assert re.search(rf"served replicas used +│ +{name} ", ran.stdout), ran.stdout
        assert took < 120, f"a run on a served replica took {took:.1f} s"
        listed = cli("serve", "--list")
        assert listed.stdout.startswith(f"{name}: "), listed.stdout
        address = up.stdout.split("Ray at ", 1)[1].split(": run with", 1)[0]
        stop = cli("serve", "--stop")
        assert stop.stdout.splitlines()[-1] == f"stopped the Ray head at {address} that debate serve started", (
            stop.stdout + stop.stderr[-2000:]
        )
        assert stop.stdout.startswith(f"stopped {name}: "), stop.stdout
        left = [p.pid for p in psutil.process_iter(["cmdline"]) if temp in " ".join(p.info["cmdline"] or [])]
        assert not left, f"processes of the served Ray left: {left}"
        assert cli("serve", "--stop").stdout.startswith("no Ray")
    finally:  # a failed test leaves no Ray behind
        for p in psutil.process_iter(["cmdline"]):
            try:
                if "ray.scripts.scripts" in " ".join(p.info["cmdline"] or []) and p.environ().get("RAY_TMPDIR") == temp:
                    p.terminate()
            except psutil.Error:
                continue


def tempfile_dir() -> str:
    """A short temp folder (Ray's socket paths must stay under 108 bytes)."""
    import tempfile

    return tempfile.mkdtemp(prefix="serve-", dir="/tmp")


def test_a_replica_that_cannot_fit_beside_served_ones_is_one_line(monkeypatch):
    """On a cluster that cannot grow, a replica asking for CPUs the served replicas hold would wait
    for them forever: one line naming them instead."""
    from ray._private import state

    import actors.cluster
    from actors.layout import ReplicaSpec

    monkeypatch.setattr(actors.cluster, "has_autoscaler", lambda: False)
    monkeypatch.setattr(state, "available_resources_per_node", lambda: {"n1": {"CPU": 0.0}})
    spec = ReplicaSpec("m", 0, {"num_cpus": 2.0}, {})
    held = [Served("vllm-m-r0-abc", None, {"served": setup()})]
    with pytest.raises(
        served.ServeError,
        match=r"needs 2 CPUs and the cluster has 0 free: the served replicas hold "
        r"them \(vllm-m-r0-abc\)",
    ):
        served.check_room([spec], held)
    served.check_room([ReplicaSpec("m", 0, {"num_cpus": 0}, {})], held)  # asks for none
    served.check_room([spec], [])  # nothing served: Ray's own wait, as before
    monkeypatch.setattr(state, "available_resources_per_node", lambda: {"n1": {"CPU": 2.0}})
    served.check_room([spec], held)


@pytest.mark.ray
@pytest.mark.slow  # a cluster of its own (about 30 s)
def test_a_served_gpu_replica_keeps_its_placement_group_until_stopped(tmp_path):
    """A replica on a GPU is served with a detached placement group: a run reuses the replica,
    reports the group's bundles and leaves the group, and ``--stop`` removes it with the replica."""
    from ray.util.placement_group import placement_group_table

    from tests.support.ray_clusters import fake_cluster

    def groups(state: str) -> int:
        return sum(1 for g in placement_group_table().values() if g["state"] == state)

    gpu = dict(device="gpu", placement_timeout=60.0)
    with fake_cluster() as c:
        c.add_node(num_cpus=1, num_gpus=1)
        assert serve.serve(cfg(tmp_path, "unused", **gpu), echo=lambda line: None) == 0
        assert groups("CREATED") == 1
        res = run(cfg(tmp_path, "run", **gpu))  # its DebateRunner's shutdown removes the groups it made
        [replica] = [p for p in res.placement if p["role"] == "replica"]
        assert replica["served"] and replica["bundles"] == [{"GPU": 1.0}] and replica["gpu_ids"] == ["0"]
        assert groups("CREATED") == 1
        out: list[str] = []
        serve.stop_command(None, None, echo=out.append)
        assert out == [f"stopped {replica['served']}: {replica['model']} replica 0"]
        assert groups("CREATED") == 0
