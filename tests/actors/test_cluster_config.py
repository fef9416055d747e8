"""cluster.yaml as ``ray up`` reads it, and the README's cluster run config against its node types.

``ray up`` cannot reach a cloud provider from here; what it does before contacting one is done
here: Ray's own ``prepare_config`` (defaults, merged setup commands) and ``validate_config``
(Ray's JSON schema for cluster configs).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from engine.config import RunConfig
from tests.support.needs import need_boto3, read_setup

ROOT = Path(__file__).resolve().parents[2]


def _cluster() -> dict:
    return yaml.safe_load((ROOT / "cluster.yaml").read_text())


def _readme_placement_config() -> dict:
    """The YAML block of the AWS page (docs/getting-started/aws.md) that follows the line naming
    ``placement.yaml``."""
    text = (ROOT / "docs" / "getting-started" / "aws.md").read_text()
    m = re.search(r"save this as `placement\.yaml`.*?```yaml[^\n]*\n(.*?)```", text, re.S | re.I)
    assert m, "docs/getting-started/aws.md: no ```yaml block after a line naming placement.yaml"
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


def test_every_node_starts_ray_so_that_a_dead_workers_processes_die_with_it():
    """Each node's ``ray start`` runs with the environment the engine's own Ray starts with
    (``RAY_WORKER_CLEANUP``: Ray kills a dead worker's process group), so a SIGKILLed or OOM-killed
    replica leaves no vLLM engine core behind on the node, holding its GPU."""
    from actors.cluster import RAY_WORKER_CLEANUP

    cfg = _cluster()
    starts = [c for c in cfg["head_start_ray_commands"] + cfg["worker_start_ray_commands"] if "ray start" in c]
    assert len(starts) == 2
    for cmd in starts:
        assignments = cmd.split("ray start")[0].split()
        for name, value in RAY_WORKER_CLEANUP.items():
            assert f"{name}={value}" in assignments, cmd


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
    from actors.layout import placement_options
    from engine.config import config_from_mapping

    run = config_from_mapping(_readme_placement_config(), "README placement.yaml").validate()
    types = _cluster()["available_node_types"]
    downloads = {name: " ".join(t.get("worker_setup_commands", [])) for name, t in types.items()}
    assert run.cluster.placement_resources, "the README's cluster config sets placement_resources"
    for model, over in run.cluster.placement_resources.items():
        actor = placement_options(run, model, {"num_cpus": 1, "num_gpus": 1})
        tp = int(over.get("tensor_parallel_size", 1))
        bundles = replica_bundles(actor, tp if tp > 1 else 0)
        need: dict[str, float] = {}
        for b in bundles:
            for k, v in b.items():
                need[k] = need.get(k, 0) + v
        fits = [name for name, t in types.items() if all(t["resources"].get(k, 0) >= v for k, v in need.items())]
        assert fits, f"{model}: no node type offers {need}"
        assert any(model in downloads[name] for name in fits), f"{model}: not downloaded on {fits}"


def test_setup_refuses_a_gpu_driver_too_old_for_the_pinned_cuda_build(tmp_path):
    """README command 1 on a GPU machine whose NVIDIA driver cannot run vLLM's CUDA 13 build:
    one line naming the driver, before anything is installed (no .venv made)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    smi = fake / "nvidia-smi"
    smi.write_text(
        '#!/bin/sh\ncase "$*" in *-L*) echo "GPU 0: NVIDIA L4 (UUID: GPU-x)";; '
        '*driver_version*) echo "550.54.14";; esac\n'
    )
    smi.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "VENV": str(tmp_path / "venv")}
    env.pop("DEBATE_VLLM", None)
    r = subprocess.run(
        ["bash", str(ROOT / "scripts" / "setup.sh")], capture_output=True, text=True, env=env, timeout=60
    )
    assert r.returncode == 1 and not (tmp_path / "venv").exists()
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "NVIDIA driver 550.54.14 is older than 580" in lines[0]
    # a current driver passes the check (stopped right after it: the venv cannot be made there)
    smi.write_text(smi.read_text().replace("550.54.14", "595.58.03"))
    r = subprocess.run(
        ["bash", str(ROOT / "scripts" / "setup.sh")],
        capture_output=True,
        text=True,
        env={**env, "VENV": "/proc/no-such-dir/venv"},
        timeout=60,
    )
    assert r.returncode != 0 and "NVIDIA driver" not in r.stderr and "/proc/no-such-dir" in r.stderr


class _LocalRsync:
    """A process runner for Ray's SSH command runner that runs its rsync commands here, a node's
    path ``ubuntu@IP:/p`` (or ``~/p``) taken as ``node/p`` (``node/home/ubuntu/p``), and no ssh
    command at all."""

    DEVNULL = subprocess.DEVNULL

    def __init__(self, node: Path):
        self.node = node
        self.rsyncs: list[list[str]] = []

    def _local(self, arg: str) -> str:
        if "@" not in arg or ":" not in arg:
            return arg
        path = arg.split(":", 1)[1].replace("~/", "/home/ubuntu/", 1)
        local = self.node / path.lstrip("/")
        local.mkdir(parents=True, exist_ok=True)  # what the updater's `ssh mkdir -p` would make
        return f"{local}/" if path.endswith("/") else str(local)

    def check_call(self, cmd: list[str], **_) -> int:
        if cmd[0] == "rsync":
            self.rsyncs.append(list(cmd))
            at = cmd.index("--rsh")
            local = [self._local(a) for a in cmd[:at] + cmd[at + 2 :]]
            subprocess.run(local, check=True, capture_output=True, timeout=60)
        return 0


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_the_sync_to_the_nodes_leaves_out_the_venv_results_and_caches(tmp_path, monkeypatch):
    """``ray up`` rsyncs the checkout (file_mounts ``.``) to the head, which syncs its copy to each
    worker the same way. A synced ``.venv`` would carry this machine's absolute paths and setup's
    stamp (setup would return at once, ``ray start`` fail); results and caches do not belong there
    either. Ray's own node updater and SSH command runner build the rsync commands from
    cluster.yaml, as ``ray up`` and ``ray rsync-down`` do; they run here with the node's paths
    replaced by a local folder. From a fake checkout holding the repository's .gitignore the code
    is copied and the rest is not; and the README's ``ray rsync-down`` of ~/runs/ still fetches
    every table of a run (its ``runs`` table included)."""
    import shutil

    from ray.autoscaler._private.updater import NodeUpdater
    from ray.autoscaler._private.util import prepare_config, validate_config
    from ray.autoscaler.node_provider import NodeProvider

    cfg = prepare_config(_cluster())
    validate_config(cfg)
    assert cfg.get("rsync_filter") or cfg.get("rsync_exclude"), "cluster.yaml syncs the checkout whole"
    if shutil.which("rsync") is None:
        pytest.skip("rsync is not installed (ray up needs it; apt-get install rsync)")
    code = ["actors/driver.py", "scripts/setup.sh", "cluster.yaml", "placement.yaml", ".gitignore"]
    left_out = [
        ".venv/bin/python",
        ".venv/.debate-setup-cpu-0123456789ab",
        "runs/placement/runs/part-0.parquet",
        "actors/__pycache__/driver.cpython-312.pyc",
        "debate_engine.egg-info/PKG-INFO",
    ]
    checkout = tmp_path / "checkout"
    results = ["placement/runs/part-0.parquet", "placement/questions/part-0.parquet"]
    node = tmp_path / "node"
    for path in [checkout / rel for rel in code + left_out] + [node / "home/ubuntu/runs" / rel for rel in results]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{path.name}\n")
    (checkout / ".gitignore").write_text((ROOT / ".gitignore").read_text())

    class Provider(NodeProvider):
        def external_ip(self, node_id):
            return "192.0.2.1"

    runner = _LocalRsync(node)
    updater = NodeUpdater(
        node_id="head",
        provider_config=cfg["provider"],
        provider=Provider(cfg["provider"], cfg["cluster_name"]),
        auth_config=cfg["auth"],
        cluster_name=cfg["cluster_name"],
        file_mounts=cfg["file_mounts"],
        initialization_commands=[],
        setup_commands=[],
        ray_start_commands=[],
        runtime_hash="",
        file_mounts_contents_hash="",
        is_head_node=True,
        process_runner=runner,
        rsync_options={"rsync_exclude": cfg.get("rsync_exclude"), "rsync_filter": cfg.get("rsync_filter")},
    )
    monkeypatch.setattr(updater.cmd_runner, "ssh_control_path", None)  # no ssh: no control folder in /tmp
    monkeypatch.chdir(checkout)  # `ray up` runs in the checkout: file_mounts' "." is it
    updater.sync_file_mounts(updater.rsync_up)
    assert len(runner.rsyncs) == 1, runner.rsyncs
    synced = _files(node / "home/ubuntu/debate-engine")
    assert sorted(code) == synced, f"synced {synced}, expected only the code {sorted(code)}"
    updater.rsync_down("~/runs/", str(tmp_path / "fetched") + "/", False)  # README: ray rsync-down '~/runs/' ./runs/
    assert _files(tmp_path / "fetched") == sorted(results)


def _stub_venv(tmp_path: Path) -> Path:
    """A .venv whose python only appends its arguments to ``calls``: scripts/setup.sh then runs
    through in a second and shows what it would install, installing nothing."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    py = venv / "bin" / "python"
    py.write_text(f'#!/bin/sh\necho "$*" >> "{venv}/calls"\n')
    py.chmod(0o755)
    return venv


def _setup(
    venv: Path, command: str = "bash scripts/setup.sh", cwd: Path = ROOT, **env: str
) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run a setup ``command`` (README command 1, or a node's setup line) on the stub ``venv``
    (no vLLM): its result and what each of its ``pip install -e`` calls asked for (``.[test]``)."""
    calls = venv / "calls"
    done = len(calls.read_text().splitlines()) if calls.exists() else 0
    full = {k: v for k, v in os.environ.items() if k != "DEBATE_EXTRAS"}
    full.update(VENV=str(venv), DEBATE_VLLM="none", PYTHON=sys.executable, **env)
    r = subprocess.run(["bash", "-c", command], cwd=cwd, env=full, capture_output=True, text=True, timeout=60)
    new = calls.read_text().splitlines()[done:] if calls.exists() else []
    return r, [c.split(" -e ", 1)[1].split()[0] for c in new if " -e " in c]


def test_setup_installs_the_extras_named_in_debate_extras(tmp_path):
    """DEBATE_EXTRAS adds pyproject.toml extras to setup's install and is part of its stamp: a
    re-run with the same extras returns at once, a re-run with another extra installs it, and an
    extra that pyproject.toml does not define stops setup with one line."""
    venv = _stub_venv(tmp_path)
    r, installs = _setup(venv)
    assert r.returncode == 0 and installs == [".[test]"], r.stderr
    assert _setup(venv)[1] == []  # the stamp: nothing to do
    r, installs = _setup(venv, DEBATE_EXTRAS="aws")
    assert r.returncode == 0 and installs == [".[test,aws]"], r.stderr
    # the record of what it installed, which the tests read (tests/support/needs.py)
    setup = read_setup(venv)
    assert setup is not None and setup.vllm == "none" and {"test", "aws", "docs"} <= setup.extras
    assert _setup(venv, DEBATE_EXTRAS="aws")[1] == []
    r, installs = _setup(venv, DEBATE_EXTRAS="aws,no-such")
    assert r.returncode == 1 and installs == []
    assert r.stderr.strip().splitlines() == [
        "setup: error: DEBATE_EXTRAS=aws,no-such: pyproject.toml has no extra 'no-such'"
    ]


def test_the_head_installs_the_aws_extra_that_rays_aws_node_provider_needs(tmp_path):
    """The head runs the autoscaler, whose AWS node provider imports boto3 (Ray's default
    head_setup_commands, which cluster.yaml replaces, install it). cluster.yaml's head setup, run
    as the head runs it (from ~/debate-engine), installs the aws extra, and the extra pins boto3."""
    from ray.autoscaler._private.util import prepare_config

    cfg = prepare_config(_cluster())
    home = tmp_path / "home"
    home.mkdir()
    (home / "debate-engine").symlink_to(ROOT)
    venv = _stub_venv(tmp_path)
    extras: set[str] = set()
    for command in cfg["head_setup_commands"]:
        r, installs = _setup(venv, command, cwd=home, HOME=str(home))
        assert r.returncode == 0, f"{command}: {r.stderr}"
        extras.update(e for spec in installs for e in spec[spec.index("[") + 1 : -1].split(","))
    assert "aws" in extras, f"the head's setup installs the extras {sorted(extras)}, not aws"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (pin,) = project["optional-dependencies"]["aws"]
    assert re.fullmatch(r"boto3==[0-9]+(\.[0-9]+)*", pin), pin


def test_the_pinned_boto3_is_installed_and_rays_aws_node_provider_imports_with_it():
    """The aws extra's boto3 is the version installed here (the test extra takes the aws extra),
    and with it the provider class that Ray looks up for cluster.yaml's provider imports."""
    need_boto3()
    from ray.autoscaler._private.providers import _get_node_provider_cls
    from ray.autoscaler._private.util import prepare_config

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"]["aws"] == [f"boto3=={version('boto3')}"]
    assert _get_node_provider_cls(prepare_config(_cluster())["provider"]).__name__ == "AWSNodeProvider"


# ----------------------------------------------------------------- the driver's GPU decision (pure)
def test_gpu_use_comes_from_the_config_not_from_the_nodes_up_now():
    from actors.cluster import gpu_hints, wants_gpu
    from engine.config import RunConfig

    autoscaling = 0.0  # GPU workers not up yet: the cluster shows no GPU
    for cfg in (
        RunConfig.flat(backend="vllm", placement_resources={"m": {"num_gpus": 1}}),
        RunConfig.flat(backend="vllm", placement_resources={"m": {"resources": {"strong_gpu": 1}}}),
        RunConfig.flat(backend="vllm", placement_resources={"m": {"tensor_parallel_size": 2}}),
        RunConfig.flat(backend="vllm", tensor_parallel=4),
        RunConfig.flat(backend="vllm", device="gpu"),
    ):
        assert gpu_hints(cfg) and wants_gpu(cfg, autoscaling), cfg
    plain = RunConfig.flat(backend="vllm")
    assert gpu_hints(plain) == [] and not wants_gpu(plain, autoscaling)
    assert wants_gpu(plain, 1.0)  # a workstation with a GPU: --device auto uses it
    assert not wants_gpu(RunConfig.flat(backend="vllm", device="cpu"), 8.0)
    # a custom resource that does not name a GPU is not a GPU request
    assert not wants_gpu(RunConfig.flat(backend="vllm", placement_resources={"m": {"resources": {"big_mem": 1}}}), 0.0)


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
    from actors.layout import replica_layout
    from engine.config import RunConfig

    gpu = RunConfig.flat(backend="transformers", placement_resources={"m": {"num_gpus": 1}})
    (spec,) = replica_layout(gpu, ["m"], gpu=True)["m"]
    assert spec.backend_options["device"] == "cuda" and spec.actor_options["num_gpus"] == 1
    (spec,) = replica_layout(RunConfig.flat(backend="transformers"), ["m"], gpu=False)["m"]
    assert spec.backend_options["device"] == "cpu" and not spec.actor_options.get("num_gpus")


def test_cpu_replicas_split_the_cpus_ray_counts_not_the_machines(monkeypatch):
    """A container's CPU limit, ``ray start --num-cpus 2`` on a 16-core machine: replicas split the
    largest node's CPUs as Ray counts them, never more than a node has (they would wait forever)."""
    import ray

    from actors.layout import replica_options
    from engine.config import RunConfig

    nodes = [
        {"Alive": True, "Resources": {"CPU": 2.0}},
        {"Alive": False, "Resources": {"CPU": 64.0}},  # gone: does not count
        {"Alive": True, "Resources": {"CPU": 1.0, "GPU": 1.0}},
    ]
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "nodes", lambda: nodes)
    cfg = RunConfig.flat(backend="transformers", device="cpu")
    ray_options, backend_options = replica_options(cfg, 1, gpu=False)
    assert ray_options == {"num_cpus": 2.0} and backend_options["threads"] == 2  # torch threads: what it holds
    assert replica_options(cfg, 4, gpu=False)[0] == {"num_cpus": 0.5}
    nodes[:] = [{"Alive": True, "Resources": {"GPU": 1.0}}]  # an autoscaling head with no CPUs: this machine's
    assert replica_options(cfg, 2, gpu=False)[0] == {"num_cpus": 8.0}
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # no Ray (planning): this machine's
    assert replica_options(cfg, 1, gpu=False)[0] == {"num_cpus": 16.0}


def _resources_view(monkeypatch, free_per_node: dict[str, dict[str, float]] | None) -> None:
    """What the driver's questions to Ray answer (``ray.is_initialized``, the cluster's resources,
    the free resources per node), in place of this process's Ray: None is no Ray. A machine's own
    GPUs, or a Ray that an earlier test left up, then count for nothing."""
    import ray
    from ray._private import state

    monkeypatch.setattr(ray, "is_initialized", lambda: free_per_node is not None)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0, "GPU": 1.0})
    monkeypatch.setattr(state, "available_resources_per_node", lambda: dict(free_per_node or {}))


def test_embedder_device_is_the_drivers_choice(monkeypatch):
    from actors.layout import embedding_placement
    from engine.config import RunConfig

    _resources_view(monkeypatch, None)
    on_gpus = RunConfig.flat(backend="vllm", protocol="cortex", placement_resources={"m": {"num_gpus": 1}})
    assert embedding_placement(on_gpus, free_gpu=True) == ({"num_cpus": 0, "num_gpus": 0.1}, "cuda")
    # no GPU share free now (the replicas hold every GPU, or the GPU nodes are not up): the CPU,
    # never a request that would wait for a GPU or make an autoscaler launch a GPU node
    assert embedding_placement(on_gpus, free_gpu=False)[1] == "cpu"
    assert embedding_placement(on_gpus)[1] == "cpu"  # no Ray cluster: nothing is free
    # left to the driver (free_gpu not given): a 0.1 share free on one node that is up, read now
    _resources_view(monkeypatch, {"a": {"CPU": 2.0, "GPU": 0.05}, "b": {"CPU": 2.0, "GPU": 0.05}})
    assert embedding_placement(on_gpus)[1] == "cpu"  # 0.1 in all, but a share cannot span nodes
    _resources_view(monkeypatch, {"a": {"CPU": 2.0, "GPU": 0.05}, "b": {"CPU": 2.0, "GPU": 0.5}})
    assert embedding_placement(on_gpus) == ({"num_cpus": 0, "num_gpus": 0.1}, "cuda")
    _resources_view(monkeypatch, None)
    opts, device = embedding_placement(RunConfig.flat(backend="vllm", protocol="cortex", device="cpu"))
    assert device == "cpu" and "num_gpus" not in opts
    assert opts["runtime_env"]["env_vars"]["CUDA_VISIBLE_DEVICES"] == ""  # sees no GPU it does not hold
    assert (
        embedding_placement(
            RunConfig.flat(backend="vllm", embedding_device="cpu", placement_resources={"m": {"num_gpus": 1}}),
            free_gpu=True,
        )[1]
        == "cpu"
    )
    # asked for by name, the GPU share is taken even when none is free now (the user's choice)
    assert embedding_placement(RunConfig.flat(backend="vllm", embedding_device="cuda"), free_gpu=False)[1] == "cuda"
    assert embedding_placement(RunConfig.flat(backend="simulated", tensor_parallel=2))[1] == "cpu"


# ----------------------------------------------------------------- GPU shares (pure)
def test_gpus_per_replica_shares_a_gpu_and_sizes_each_engine():
    from actors.cluster import gpu_hints
    from actors.layout import replica_layout

    cfg = RunConfig.flat(backend="vllm", gpus_per_replica=0.25, replicas=4)
    assert "--gpus-per-replica 0.25" in gpu_hints(cfg)  # a GPU request, even before GPU nodes are up
    specs = replica_layout(cfg, ["m"], gpu=True)["m"]
    assert len(specs) == 4
    for spec in specs:
        assert spec.actor_options["num_gpus"] == 0.25 and spec.bundles == ({"CPU": 1.0, "GPU": 0.25},)
        assert spec.backend_options["gpu_memory_utilization"] == 0.225  # 0.9 of the whole GPU x 0.25
    # a whole GPU keeps vLLM's own default; a utilization the user gives is kept as given
    (whole,) = replica_layout(RunConfig.flat(backend="vllm"), ["m"], gpu=True)["m"]
    assert whole.actor_options["num_gpus"] == 1 and "gpu_memory_utilization" not in whole.backend_options
    (given,) = replica_layout(
        RunConfig.flat(backend="vllm", gpus_per_replica=0.5, gpu_memory_utilization=0.3), ["m"], gpu=True
    )["m"]
    assert given.backend_options["gpu_memory_utilization"] == 0.3
    # per model: gpus_per_replica (or Ray's name, num_gpus)
    per_model = RunConfig.flat(
        backend="vllm", placement_resources={"a": {"gpus_per_replica": 0.5}, "b": {"num_gpus": 0.5}}
    )
    layout = replica_layout(per_model, ["a", "b"], gpu=True)
    assert [layout[m][0].actor_options["num_gpus"] for m in "ab"] == [0.5, 0.5]
    assert [layout[m][0].backend_options["gpu_memory_utilization"] for m in "ab"] == [0.45, 0.45]
    assert "placement_resources[a].gpus_per_replica" in gpu_hints(per_model)


@pytest.mark.parametrize(
    "kw,needle",
    [
        (dict(gpus_per_replica=2), "--gpus-per-replica 2: a replica without tensor parallelism uses one GPU"),
        (dict(placement_resources={"m": {"num_gpus": 4}}), "placement_resources['m'].num_gpus 4: a replica without"),
        (
            dict(placement_resources={"m": {"tensor_parallel_size": 2, "gpus_per_replica": 0.5}}),
            "placement_resources['m'].gpus_per_replica 0.5 with tensor parallel 2: "
            "a tensor-parallel replica takes 2 whole",
        ),
        (dict(placement_resources={"m": {"num_gpus": 1, "gpus_per_replica": 0.5}}), "disagree"),
    ],
)
def test_gpu_requests_a_replica_cannot_use_are_one_line(kw, needle):
    from actors.layout import replica_layout

    with pytest.raises(ValueError) as err:
        replica_layout(RunConfig.flat(backend="vllm", **kw), ["m"], gpu=True)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_gpus_per_replica_must_be_positive():
    from engine.options import ConfigError

    with pytest.raises(ConfigError, match="--gpus-per-replica must be a positive number"):
        RunConfig.flat(gpus_per_replica=0).validate()


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
    assert cluster.default_placement_timeout(RunConfig.flat(placement_timeout=30)) == 30.0
    monkeypatch.setattr(v2, "is_autoscaler_v2", lambda **_: True)
    report["active_nodes"] = {}
    assert cluster.has_autoscaler()
