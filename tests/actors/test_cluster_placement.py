"""Placement on a multi-node Ray cluster, simulated on this machine (``ray.cluster_utils.Cluster``).

Three nodes as cluster.yaml's node types: a CPU head (the driver's node), a "strong" node that
declares 4 GPUs and ``strong_gpu``, a "weak" node with 2 GPUs and ``weak_gpu``. Nodes may declare
GPUs they do not have; the simulated backend takes every placement setting of vLLM, so the whole
layout (placement groups, tensor-parallel bundles, custom resources, node pinning) is exercised.
"""

from __future__ import annotations

import json

import pytest

from engine.config import RunConfig
from engine.results import read_table
from tests.support.ray_clusters import fake_cluster

pytestmark = pytest.mark.ray

PLACEMENT = {
    "big": {"tensor_parallel_size": 2, "resources": {"strong_gpu": 2}},
    "small": {"num_gpus": 1, "replicas": 2, "resources": {"weak_gpu": 1}},
}


@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("ray")
    with fake_cluster() as c:
        nodes = {
            "head": c.head_node.node_id,
            "strong": c.add_node(num_cpus=2, num_gpus=4, resources={"strong_gpu": 4}).node_id,
            "weak": c.add_node(num_cpus=2, num_gpus=2, resources={"weak_gpu": 2}).node_id,
        }
        c.wait_for_nodes()
        yield nodes


def _cfg(tmp_path, name: str, **kw) -> RunConfig:
    base = dict(
        protocol="mad",
        agents=4,
        rounds=2,
        limit=3,
        backend="simulated",
        models="big*1,small*3",
        strong_agents="central",
        placement_resources=PLACEMENT,
        temperature=0.0,
        progress=False,
        placement_timeout=120.0,
        out=str(tmp_path / name),
    )
    base.update(kw)
    return RunConfig.flat(**base)


def _placement(out) -> list[dict]:
    (row,) = read_table(out, "runs").to_pylist()
    return json.loads(row["placement"])


def test_heterogeneous_run_places_each_model_on_its_node_type(cluster, tmp_path):
    from actors.driver import DebateRunner

    with DebateRunner() as runner:
        first = runner.run(_cfg(tmp_path, "one"))
        replicas_after_first = dict(runner._replicas)
        second = runner.run(_cfg(tmp_path, "two", seed=1))
        assert runner._replicas == replicas_after_first  # the second run reused every replica
    assert first.summary["n_errors"] == 0 and second.summary["n_errors"] == 0
    for res in (first, second):
        placed = _placement(res.out_dir)
        assert placed == res.placement
        by_role = {}
        for e in placed:
            by_role.setdefault(e["role"], []).append(e)
        (big,) = [e for e in by_role["replica"] if e["model"] == "big"]
        smalls = sorted((e for e in by_role["replica"] if e["model"] == "small"), key=lambda e: e["replica"])
        # the tensor-parallel replica: both GPU bundles and the actor on the strong node
        assert big["node_id"] == cluster["strong"] and big["bundle_nodes"] == [cluster["strong"]] * 2
        assert big["bundles"] == [{"GPU": 1.0, "strong_gpu": 2.0}, {"GPU": 1.0}]
        assert big["resources"] == {"resources": {"strong_gpu": 2}} and big["gpu_ids"] == []
        # two one-GPU replicas on the weak node, each holding its own GPU
        assert [e["replica"] for e in smalls] == [0, 1]
        assert all(e["node_id"] == cluster["weak"] and len(e["gpu_ids"]) == 1 for e in smalls)
        assert smalls[0]["gpu_ids"] != smalls[1]["gpu_ids"]
        # run state stays on the driver's node (the head)
        assert [e["node_id"] for e in by_role["writer"] + by_role["coordinator"]] == [cluster["head"]] * 2
    # the report prints where each replica ran
    from app.report import placement_text

    text = placement_text(json.dumps(first.placement))
    assert "big#0 @" in text and "(2 bundles on 1 node)" in text and "writer, coordinator @" in text  # both on the head


def test_a_replica_no_node_can_hold_fails_in_one_line(cluster, tmp_path):
    from actors.cluster import PlacementTimeout
    from actors.driver import DebateRunner

    cfg = _cfg(
        tmp_path,
        "none",
        models=None,
        strong_agents="none",
        model="huge",
        limit=1,
        placement_resources={"huge": {"tensor_parallel_size": 4, "resources": {"huge_gpu": 1}}},
        placement_timeout=3.0,
    )
    with DebateRunner() as runner, pytest.raises(PlacementTimeout) as err:
        runner.run(cfg)
    msg = str(err.value)
    assert "\n" not in msg and "--model huge" in msg and "no node offers 4 GPUs + huge_gpu:1" in msg
    assert "waited 3 s" in msg
