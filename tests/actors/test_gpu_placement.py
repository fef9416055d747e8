"""GPU placement on fake-GPU Ray clusters (``ray.cluster_utils.Cluster`` nodes declare GPUs they
do not have): what a first GPU run depends on, seen without a GPU.

* every replica's placement group is asked for before any is waited on, so an autoscaler sees the
  whole demand at once (one pending group at a time made it bring nodes up one after another);
* replicas sharing one GPU (``--gpus-per-replica 0.25``) land on it, each vLLM engine sized to its
  share (0.9 x 0.25), and load one after another;
* the embedder takes a GPU share only where one is free now;
* a restarted replica whose model does not load again ends its process, so Ray counts the restart
  and finally reports it dead, instead of staying up and answering every call with an error.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from engine.config import RunConfig
from engine.results import read_table
from tests.support.ray_clusters import fake_cluster

pytestmark = pytest.mark.ray


@pytest.fixture
def cluster():
    """A CPU head only; tests add (fake) GPU nodes."""
    pytest.importorskip("ray")
    with fake_cluster() as c:
        yield c


def _pending_groups() -> int:
    from ray.util.placement_group import placement_group_table

    return sum(1 for g in placement_group_table().values() if g["state"] == "PENDING")


def test_every_replica_group_is_asked_for_before_any_is_waited_on(cluster, tmp_path):
    """Three one-GPU replicas and no GPU node yet: all three groups are pending together (the
    autoscaler's demand), and once a node with three GPUs joins, the run goes on within one deadline."""
    from actors.driver import DebateRunner

    cfg = RunConfig.flat(
        backend="simulated",
        protocol="mad",
        agents=3,
        rounds=2,
        limit=2,
        replicas=3,
        device="gpu",
        progress=False,
        placement_timeout=120.0,
        out=str(tmp_path / "run"),
    )
    result: dict = {}

    def go():
        try:
            with DebateRunner() as runner:
                result["res"] = runner.run(cfg)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            result["err"] = exc

    t = threading.Thread(target=go, daemon=True)
    t.start()
    deadline, most = time.time() + 60, 0
    while time.time() < deadline and most < 3 and t.is_alive():
        most = max(most, _pending_groups())
        time.sleep(0.2)
    assert most == 3, f"at most {most} placement group(s) pending at once: the replicas were reserved one by one"
    node = cluster.add_node(num_cpus=1, num_gpus=3)
    t.join(120)
    assert not t.is_alive() and "err" not in result, result.get("err")
    res = result["res"]
    replicas = [e for e in res.placement if e["role"] == "replica"]
    assert len(replicas) == 3 and {e["node_id"] for e in replicas} == {node.node_id}
    assert sorted(e["gpu_ids"][0] for e in replicas) == ["0", "1", "2"]


def test_placement_timeout_is_one_deadline_naming_what_waits(cluster, tmp_path, monkeypatch):
    """Two replicas no node can hold: asked for together and waited on with one deadline (not one
    timeout per replica), then one line naming the first and counting the rest; no group is left."""
    from ray.util.placement_group import placement_group_table

    from actors import cluster as placement
    from actors.cluster import PlacementTimeout
    from actors.driver import DebateRunner

    calls: list[tuple[int, float]] = []
    reserve_all = placement.reserve_all

    def spy(asks, timeout_s, **kw):
        t0 = time.monotonic()
        try:
            return reserve_all(asks, timeout_s, **kw)
        finally:
            calls.append((len(asks), time.monotonic() - t0))

    monkeypatch.setattr(placement, "reserve_all", spy)
    cfg = RunConfig.flat(
        backend="simulated",
        protocol="mad",
        agents=2,
        rounds=2,
        limit=1,
        replicas=2,
        device="gpu",
        progress=False,
        placement_timeout=3.0,
        out=str(tmp_path / "run"),
    )
    with DebateRunner() as runner, pytest.raises(PlacementTimeout) as err:
        runner.run(cfg)
    msg = str(err.value)
    assert "\n" not in msg and "(replica 0): no node offers 1 GPU (and 1 more placement group of this run)" in msg
    assert "waited 3 s" in msg
    ((asked, took),) = calls  # both groups in one wait
    assert asked == 2 and 3.0 <= took < 3.0 + 3.0, calls
    assert not [g for g in placement_group_table().values() if g["state"] != "REMOVED"]


def test_four_replicas_share_one_gpu_each_sized_to_its_share(cluster, tmp_path):
    """``--gpus-per-replica 0.25``: four replicas on the one GPU of a fake 1-GPU node, each engine
    given 0.9 x 0.25 = 0.225 of its memory."""
    from actors.driver import DebateRunner

    node = cluster.add_node(num_cpus=2, num_gpus=1)
    cfg = RunConfig.flat(
        backend="simulated",
        protocol="mad",
        agents=4,
        rounds=2,
        limit=2,
        replicas=4,
        gpus_per_replica=0.25,
        progress=False,
        placement_timeout=60.0,
        out=str(tmp_path / "run"),
    )
    with DebateRunner() as runner:
        res = runner.run(cfg)
    assert res.summary["n_errors"] == 0
    replicas = [e for e in res.placement if e["role"] == "replica"]
    assert len(replicas) == 4
    assert all(e["node_id"] == node.node_id and e["gpu_ids"] == ["0"] for e in replicas)
    assert all(e["bundles"] == [{"GPU": 0.25}] for e in replicas)  # the simulated replica takes no CPU
    (row,) = read_table(res.out_dir, "runs").to_pylist()
    engine_settings = json.loads(row["engine"])
    assert [e.get("gpu_memory_utilization") for e in engine_settings] == [0.225]


def test_replicas_sharing_a_gpu_load_one_after_another(cluster):
    """Four replicas on one GPU, each load taking 1 s: no two loads overlap (vLLM would count a
    co-tenant's allocations while it profiles), whereas replicas on separate GPUs load at once."""
    import ray

    from actors.replica_actor import ReplicaActor

    cluster.add_node(num_cpus=2, num_gpus=2)
    shared = [ReplicaActor.options(num_gpus=0.25).remote("simulated", "m", {"load_s": 1.0}) for _ in range(4)]
    infos = ray.get([a.info.remote() for a in shared], timeout=60)
    assert len({tuple(i["gpu_ids"]) for i in infos}) == 1  # Ray packed the four shares on one GPU
    windows = sorted((i["loaded"]["start"], i["loaded"]["end"]) for i in infos)
    for (_, end), (start, _) in zip(windows, windows[1:]):
        assert start >= end - 0.05, f"two loads on one GPU overlapped: {windows}"
    for a in shared:
        ray.kill(a)
    # long loads, so that the second actor's process start (seconds on a busy machine) falls inside the first's
    whole = [ReplicaActor.options(num_gpus=1).remote("simulated", "m", {"load_s": 5.0}) for _ in range(2)]
    a, b = (i["loaded"] for i in ray.get([x.info.remote() for x in whole], timeout=60))
    assert a["start"] < b["end"] and b["start"] < a["end"], "replicas on different GPUs waited for each other"


def test_the_embedder_takes_a_gpu_share_only_where_one_is_free(cluster):
    """A fake 1-GPU node whose GPU a replica's group holds: ``auto`` is the CPU (a 0.1 share would
    wait out the timeout, or launch a GPU node on an autoscaling cluster); with the GPU free, cuda."""
    import ray

    from actors.cluster import free_gpu_share
    from actors.layout import embedding_placement

    cluster.add_node(num_cpus=1, num_gpus=1)
    cfg = RunConfig.flat(backend="vllm", protocol="cortex", device="gpu")
    pg = ray.util.placement_group([{"GPU": 1.0}], strategy="STRICT_PACK")
    ray.get(pg.ready(), timeout=30)
    deadline = time.time() + 10
    while time.time() < deadline and free_gpu_share(0.1):  # the resource view catches up
        time.sleep(0.1)
    assert not free_gpu_share(0.1)
    assert embedding_placement(cfg) == (
        {"num_cpus": 0, "runtime_env": {"env_vars": {"CUDA_VISIBLE_DEVICES": ""}}},
        "cpu",
    )
    ray.util.remove_placement_group(pg)
    deadline = time.time() + 10
    while time.time() < deadline and not free_gpu_share(0.1):
        time.sleep(0.1)
    assert embedding_placement(cfg) == ({"num_cpus": 0, "num_gpus": 0.1}, "cuda")


def test_no_autoscaler_on_a_plain_cluster(cluster):
    """The head's monitor reports only the anonymous node types of nodes already up: no autoscaler,
    so the placement timeout keeps its 600 s default."""
    from ray.experimental.internal_kv import _internal_kv_get

    from actors.cluster import default_placement_timeout, has_autoscaler

    deadline = time.time() + 30
    while time.time() < deadline and _internal_kv_get("__autoscaling_status") is None:
        time.sleep(0.5)
    assert _internal_kv_get("__autoscaling_status") is not None, "the monitor never reported"
    assert not has_autoscaler()
    assert default_placement_timeout(RunConfig()) == 600.0
    assert default_placement_timeout(RunConfig.flat(placement_timeout=42.0)) == 42.0


def test_a_restarted_replica_that_cannot_load_again_is_dead_not_half_alive(ray_local, tmp_path):
    """A replica's process dies (SIGKILL, the OOM killer) and its model cannot be loaded again (here:
    the folder is gone; on a GPU: memory still held by the dead engine). Each restart ends its own
    process, so Ray counts the restarts and then reports the replica dead — never a live replica
    answering every call with an error for the rest of the run."""
    import os
    import shutil
    import signal

    import ray

    from actors.replica_actor import ReplicaActor
    from tests.support.tiny_vlm import build_tiny_text_model

    folder = build_tiny_text_model(tmp_path / "tiny")
    actor = ReplicaActor.options(max_restarts=2, max_task_retries=0).remote(
        "transformers", str(folder), {"device": "cpu", "threads": 1}
    )
    info = ray.get(actor.info.remote(), timeout=120)
    assert not info.get("error"), info
    shutil.rmtree(folder)
    os.kill(info["pid"], signal.SIGKILL)
    from ray._private.state import actors

    deadline, table = time.time() + 180, {}
    while time.time() < deadline:
        table = actors(actor._actor_id.hex())
        if table["State"] == "DEAD":
            break
        if table["State"] == "ALIVE" and table["NumRestarts"] >= 1:
            again = ray.get(actor.info.remote(), timeout=60)
            assert not again.get("error"), f"a restarted replica stayed up without its model: {again['error']}"
        time.sleep(0.5)
    assert table["State"] == "DEAD" and table["NumRestarts"] == 2, table
    with pytest.raises(ray.exceptions.RayActorError):  # the agents see it gone: resend, then error rows
        ray.get(actor.info.remote(), timeout=60)
