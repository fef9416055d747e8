"""cluster.yaml as ``ray up`` reads it, and the README's cluster run config against its node types.

``ray up`` cannot reach a cloud provider from here; what it does before contacting one is done
here: Ray's own ``prepare_config`` (defaults, merged setup commands) and ``validate_config``
(Ray's JSON schema for cluster configs).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from engine.config import RunConfig

ROOT = Path(__file__).resolve().parents[1]


def _cluster() -> dict:
    return yaml.safe_load((ROOT / "cluster.yaml").read_text())


def _readme_placement_config() -> dict:
    """The YAML block of the README that follows the line naming ``placement.yaml``."""
    text = (ROOT / "README.md").read_text()
    m = re.search(r"save this as `placement\.yaml`.*?```yaml\n(.*?)```", text, re.S)
    assert m, "README: no ```yaml block after a line naming placement.yaml"
    return yaml.safe_load(m.group(1))


def test_cluster_yaml_passes_rays_schema_check():
    from ray.autoscaler._private.util import prepare_config, validate_config

    cfg = prepare_config(_cluster())
    validate_config(cfg)  # raises jsonschema.ValidationError / ValueError on a bad file
    assert cfg["head_node_type"] == "head"
    # every node starts Ray from the .venv that README command 1's setup makes
    for cmd in cfg["head_start_ray_commands"] + cfg["worker_start_ray_commands"]:
        if "ray start" in cmd:
            assert "~/debate-engine/.venv/bin/ray start" in cmd
    types = cfg["available_node_types"]
    for name in ("gpu_strong", "gpu_weak"):
        cmds = " ".join(types[name]["worker_setup_commands"])
        assert "scripts/setup.sh" in cmds and "hf download" in cmds
        assert types[name]["resources"]["GPU"] >= 1
    assert "GPU" not in types["head"]["resources"]


def test_schema_check_catches_a_bad_file():
    """The check above can fail: a misspelt key is rejected by Ray's schema."""
    import jsonschema
    from ray.autoscaler._private.util import prepare_config, validate_config

    bad = _cluster()
    bad["available_node_types"]["gpu_weak"]["resourcez"] = bad["available_node_types"]["gpu_weak"].pop("resources")
    with pytest.raises(jsonschema.ValidationError):
        validate_config(prepare_config(bad))


def test_readme_run_config_fits_the_node_types():
    """Each model's placement (its placement-group bundles, as the driver builds them) fits on one
    node type of cluster.yaml, and the models are the ones the node types download."""
    from actors.cluster import replica_bundles
    from actors.driver import placement_options
    from engine.config import config_from_mapping

    run = config_from_mapping(_readme_placement_config(), "README placement.yaml").validate()
    types = _cluster()["available_node_types"]
    downloads = {name: " ".join(t.get("worker_setup_commands", [])) for name, t in types.items()}
    assert run.placement_resources, "the README's cluster config sets placement_resources"
    for model, over in run.placement_resources.items():
        actor = placement_options(run, model, {"num_cpus": 1, "num_gpus": 1})
        tp = int(over.get("tensor_parallel_size", 1))
        bundles = replica_bundles(actor, tp if tp > 1 else 0)
        need: dict[str, float] = {}
        for b in bundles:
            for k, v in b.items():
                need[k] = need.get(k, 0) + v
        fits = [name for name, t in types.items()
                if all(t["resources"].get(k, 0) >= v for k, v in need.items())]
        assert fits, f"{model}: no node type offers {need}"
        assert any(model in downloads[name] for name in fits), f"{model}: not downloaded on {fits}"


def test_setup_refuses_a_gpu_driver_too_old_for_the_pinned_cuda_build(tmp_path):
    """README command 1 on a GPU machine whose NVIDIA driver cannot run vLLM's CUDA 13 build:
    one line naming the driver, before anything is installed (no .venv made)."""
    import os
    import subprocess

    fake = tmp_path / "bin"
    fake.mkdir()
    smi = fake / "nvidia-smi"
    smi.write_text('#!/bin/sh\ncase "$*" in *-L*) echo "GPU 0: NVIDIA L4 (UUID: GPU-x)";; '
                   '*driver_version*) echo "550.54.14";; esac\n')
    smi.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "VENV": str(tmp_path / "venv")}
    env.pop("DEBATE_VLLM", None)
    r = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh")], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 1 and not (tmp_path / "venv").exists()
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "NVIDIA driver 550.54.14 is older than 580" in lines[0]
    # a current driver passes the check (stopped right after it: the venv cannot be made there)
    smi.write_text(smi.read_text().replace("550.54.14", "595.58.03"))
    r = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh")], capture_output=True, text=True,
                       env={**env, "VENV": "/proc/no-such-dir/venv"}, timeout=60)
    assert r.returncode != 0 and "NVIDIA driver" not in r.stderr and "/proc/no-such-dir" in r.stderr


# ----------------------------------------------------------------- the driver's GPU decision (pure)
def test_gpu_use_comes_from_the_config_not_from_the_nodes_up_now():
    from actors.cluster import gpu_hints, wants_gpu
    from engine.config import RunConfig

    autoscaling = 0.0  # GPU workers not up yet: the cluster shows no GPU
    for cfg in (RunConfig(backend="vllm", placement_resources={"m": {"num_gpus": 1}}),
                RunConfig(backend="vllm", placement_resources={"m": {"resources": {"strong_gpu": 1}}}),
                RunConfig(backend="vllm", placement_resources={"m": {"tensor_parallel_size": 2}}),
                RunConfig(backend="vllm", tensor_parallel=4),
                RunConfig(backend="vllm", device="gpu")):
        assert gpu_hints(cfg) and wants_gpu(cfg, autoscaling), cfg
    plain = RunConfig(backend="vllm")
    assert gpu_hints(plain) == [] and not wants_gpu(plain, autoscaling)
    assert wants_gpu(plain, 1.0)  # a workstation with a GPU: --device auto uses it
    assert not wants_gpu(RunConfig(backend="vllm", device="cpu"), 8.0)
    # a custom resource that does not name a GPU is not a GPU request
    assert not wants_gpu(RunConfig(backend="vllm", placement_resources={"m": {"resources": {"big_mem": 1}}}), 0.0)


def test_placement_group_bundles_and_their_description():
    from actors.cluster import describe, needs_group, replica_bundles

    actor = {"num_cpus": 1, "num_gpus": 1, "resources": {"strong_gpu": 1}}
    tp4 = replica_bundles(actor, 4)
    assert tp4 == [{"CPU": 1.0, "strong_gpu": 1.0, "GPU": 1.0}] + [{"GPU": 1.0}] * 3
    assert describe(tp4) == "4 GPUs + strong_gpu:1 + 1 CPU"
    assert replica_bundles({"num_cpus": 0, "num_gpus": 1}, 0) == [{"GPU": 1.0}]  # zero entries dropped
    assert replica_bundles({"num_cpus": 2, "resources": {"weak_gpu": 0.5}}, 0) == [{"CPU": 2.0, "weak_gpu": 0.5}]
    assert needs_group(actor, 0) and needs_group({"num_cpus": 1}, 2) and not needs_group({"num_cpus": 4}, 0)


def test_transformers_replica_is_told_its_device():
    from actors.driver import replica_layout
    from engine.config import RunConfig

    gpu = RunConfig(backend="transformers", placement_resources={"m": {"num_gpus": 1}})
    (spec,) = replica_layout(gpu, ["m"], gpu=True)["m"]
    assert spec.backend_options["device"] == "cuda" and spec.actor_options["num_gpus"] == 1
    (spec,) = replica_layout(RunConfig(backend="transformers"), ["m"], gpu=False)["m"]
    assert spec.backend_options["device"] == "cpu" and not spec.actor_options.get("num_gpus")


def test_embedder_device_is_the_drivers_choice():
    from actors.driver import embedding_placement
    from engine.config import RunConfig

    on_gpus = RunConfig(backend="vllm", protocol="cortex", placement_resources={"m": {"num_gpus": 1}})
    assert embedding_placement(on_gpus, free_gpu=True) == ({"num_cpus": 0, "num_gpus": 0.1}, "cuda")
    # no GPU share free now (the replicas hold every GPU, or the GPU nodes are not up): the CPU,
    # never a request that would wait for a GPU or make an autoscaler launch a GPU node
    assert embedding_placement(on_gpus, free_gpu=False)[1] == "cpu"
    assert embedding_placement(on_gpus)[1] == "cpu"  # no Ray cluster: nothing is free
    opts, device = embedding_placement(RunConfig(backend="vllm", protocol="cortex", device="cpu"))
    assert device == "cpu" and "num_gpus" not in opts
    assert opts["runtime_env"]["env_vars"]["CUDA_VISIBLE_DEVICES"] == ""  # sees no GPU it does not hold
    assert embedding_placement(RunConfig(backend="vllm", embedding_device="cpu",
                                         placement_resources={"m": {"num_gpus": 1}}), free_gpu=True)[1] == "cpu"
    # asked for by name, the GPU share is taken even when none is free now (the user's choice)
    assert embedding_placement(RunConfig(backend="vllm", embedding_device="cuda"), free_gpu=False)[1] == "cuda"
    assert embedding_placement(RunConfig(backend="simulated", tensor_parallel=2))[1] == "cpu"


# ----------------------------------------------------------------- GPU shares (pure)
def test_gpus_per_replica_shares_a_gpu_and_sizes_each_engine():
    from actors.cluster import gpu_hints
    from actors.driver import replica_layout

    cfg = RunConfig(backend="vllm", gpus_per_replica=0.25, replicas=4)
    assert "--gpus-per-replica 0.25" in gpu_hints(cfg)  # a GPU request, even before GPU nodes are up
    specs = replica_layout(cfg, ["m"], gpu=True)["m"]
    assert len(specs) == 4
    for spec in specs:
        assert spec.actor_options["num_gpus"] == 0.25 and spec.bundles == ({"CPU": 1.0, "GPU": 0.25},)
        assert spec.backend_options["gpu_memory_utilization"] == 0.225  # 0.9 of the whole GPU x 0.25
    # a whole GPU keeps vLLM's own default; a utilization the user gives is kept as given
    (whole,) = replica_layout(RunConfig(backend="vllm"), ["m"], gpu=True)["m"]
    assert whole.actor_options["num_gpus"] == 1 and "gpu_memory_utilization" not in whole.backend_options
    (given,) = replica_layout(RunConfig(backend="vllm", gpus_per_replica=0.5, gpu_memory_utilization=0.3), ["m"],
                              gpu=True)["m"]
    assert given.backend_options["gpu_memory_utilization"] == 0.3
    # per model: gpus_per_replica (or Ray's name, num_gpus)
    per_model = RunConfig(backend="vllm", placement_resources={"a": {"gpus_per_replica": 0.5}, "b": {"num_gpus": 0.5}})
    layout = replica_layout(per_model, ["a", "b"], gpu=True)
    assert [layout[m][0].actor_options["num_gpus"] for m in "ab"] == [0.5, 0.5]
    assert [layout[m][0].backend_options["gpu_memory_utilization"] for m in "ab"] == [0.45, 0.45]
    assert "placement_resources[a].gpus_per_replica" in gpu_hints(per_model)


@pytest.mark.parametrize("kw,needle", [
    (dict(gpus_per_replica=2), "--gpus-per-replica 2: a replica without tensor parallelism uses one GPU"),
    (dict(placement_resources={"m": {"num_gpus": 4}}), "placement_resources['m'].num_gpus 4: a replica without"),
    (dict(placement_resources={"m": {"tensor_parallel_size": 2, "gpus_per_replica": 0.5}}),
     "placement_resources['m'].gpus_per_replica 0.5 with tensor parallel 2: a tensor-parallel replica takes 2 whole"),
    (dict(placement_resources={"m": {"num_gpus": 1, "gpus_per_replica": 0.5}}), "disagree"),
])
def test_gpu_requests_a_replica_cannot_use_are_one_line(kw, needle):
    from actors.driver import replica_layout

    with pytest.raises(ValueError) as err:
        replica_layout(RunConfig(backend="vllm", **kw), ["m"], gpu=True)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_gpus_per_replica_must_be_positive():
    from engine.options import ConfigError

    with pytest.raises(ConfigError, match="--gpus-per-replica must be a positive number"):
        RunConfig(gpus_per_replica=0).validate()


def test_an_autoscaler_is_told_from_the_monitors_node_types(monkeypatch):
    """v1's monitor names each node of a cluster without an autoscaling config ``node_<id>``; with
    one, by its node type. The placement timeout's default follows (600 s, or 1800 s)."""
    import json

    import ray
    import ray.autoscaler.v2.utils as v2
    import ray.experimental.internal_kv as kv

    from actors import cluster

    report: dict = {}
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(v2, "is_autoscaler_v2", lambda **_: False)
    monkeypatch.setattr(kv, "_internal_kv_get", lambda key, **_: json.dumps({"autoscaler_report": report}).encode())
    report["active_nodes"] = {"node_" + "ab" * 28: 1}  # a local instance / hand-started nodes
    assert not cluster.has_autoscaler() and cluster.default_placement_timeout(RunConfig()) == 600.0
    report["active_nodes"] = {"head": 1}  # cluster.yaml's head under `ray up`
    assert cluster.has_autoscaler() and cluster.default_placement_timeout(RunConfig()) == 1800.0
    assert cluster.default_placement_timeout(RunConfig(placement_timeout=30)) == 30.0
    monkeypatch.setattr(v2, "is_autoscaler_v2", lambda **_: True)
    report["active_nodes"] = {}
    assert cluster.has_autoscaler()
