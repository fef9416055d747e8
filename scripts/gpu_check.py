"""The first thing to run on a GPU machine: tiny debates through every installed backend, one line per check.

It starts Ray the engine's way, lists the GPUs Ray sees, and runs short debates (MAD, 3 agents,
2 rounds, 2 arithmetic questions, 16-token replies) through each model backend that is installed
(vLLM, transformers), each check on fresh actors:

* ``one replica``           -- one replica on one GPU; every call answered, the replica holds a GPU;
* ``replicas share a GPU``  -- two replicas at ``--gpus-per-replica 0.5`` on the same GPU, each vLLM
                               engine sized to its half (gpu_memory_utilization 0.45), loaded one
                               after the other;
* ``embedder on the GPU``   -- S2-MAD with embedding similarity beside half-GPU replicas: the
                               embedding actor takes a free 0.1 GPU share;
* ``tensor parallel 2``     -- vLLM only, with 2 GPUs or more: one replica over two GPUs;
* ``replica killed``        -- the replica's process is SIGKILLed mid-run: Ray restarts it, the
                               agents resend, every call is answered, and no engine process of the
                               dead replica outlives it (vLLM).

Without a GPU the GPU checks are skipped (saying so) and ``one replica`` and ``replica killed`` run
on the CPU, so the script is exercised on any machine (tests/scripts/test_gpu_check.py). It works offline
on a tiny random-weight Llama it builds (tests/support/tiny_vlm.py; texts are noise, every engine path is
real), or on ``--model`` (a local folder or a hub id). Prints one line per check and saves JSON
(``--out``); exits 1 if any check failed.

Usage::

    .venv/bin/python scripts/gpu_check.py                      # tiny model, every backend installed
    .venv/bin/python scripts/gpu_check.py --model Qwen/Qwen2.5-0.5B-Instruct --backends vllm
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts._bench_common import machine_info  # noqa: E402

BACKENDS = ("vllm", "transformers")


class Skip(Exception):
    """A check that does not apply on this machine (the reason is its message)."""


def installed_backends() -> list[str]:
    """The model backends this environment can run: vLLM where it is installed, transformers always."""
    from backends.installed import vllm_installed

    return [b for b in BACKENDS if b != "vllm" or vllm_installed()]


def ray_gpus() -> dict[str, Any]:
    """The GPUs Ray sees: in total, per node, and the device names torch sees on this node."""
    import ray

    nodes = [
        {"node_id": n["NodeID"], "ip": n.get("NodeManagerAddress"), "gpus": n.get("Resources", {}).get("GPU", 0)}
        for n in ray.nodes()
        if n.get("Alive")
    ]
    names: list[str] = []
    try:
        import torch

        if torch.cuda.is_available():
            names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001 - a broken CUDA install is what this script should show, not crash on
        names = [f"torch cannot see them: {traceback.format_exc().splitlines()[-1]}"]
    return {"total": float(ray.cluster_resources().get("GPU", 0)), "nodes": nodes, "torch_names": names}


def _config(backend: str, model: str, out: Path, **kw):
    from engine.config import RunConfig

    base = dict(
        backend=backend,
        model=model,
        protocol="mad",
        agents=3,
        rounds=2,
        limit=2,
        max_tokens=16,
        temperature=0.0,
        progress=False,
        out=str(out),
        placement_timeout=300.0,
        max_restarts=2,
        call_retries=3,
    )
    base.update(kw)
    return RunConfig.flat(**base).validate()


def _answered(res) -> str:
    s = res.summary
    if s["n_errors"] or any(q["errored"] for q in res.questions):
        raise AssertionError(f"{s['n_errors']} calls failed of {s['n_calls']}")
    return f"{s['n_calls']} calls answered"


def _replicas(res) -> list[dict[str, Any]]:
    return [e for e in res.placement if e["role"] == "replica"]


def _engine_processes(pid: int) -> set[int]:
    import psutil

    try:
        return {p.pid for p in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return set()


class Checks:
    """The checks of one machine; ``run`` records each as a dict (name, status, detail, seconds)."""

    def __init__(self, model: str, work: Path, gpus: float, backends: list[str], say: Callable[[str], None] = print):
        self.model, self.work, self.gpus, self.backends, self.say = model, work, gpus, backends, say
        self.results: list[dict[str, Any]] = []

    def run(self, name: str, fn: Callable[[], str]) -> None:
        entry: dict[str, Any] = {"name": name}
        t0 = time.perf_counter()
        try:
            entry.update(status="PASS", detail=fn())
        except Skip as exc:
            entry.update(status="SKIP", detail=str(exc))
        except Exception as exc:  # noqa: BLE001 - every failure is one line here, its traceback in the JSON
            entry.update(
                status="FAIL",
                detail=f"{type(exc).__name__}: {' '.join(str(exc).split())[:400]}",
                traceback=traceback.format_exc(),
            )
        entry["seconds"] = round(time.perf_counter() - t0, 1)
        self.results.append(entry)
        self.say(f"{entry['status']:4}  {name}: {entry['detail']} ({entry['seconds']:.0f} s)")

    def _engine_run(self, cfg, progress_cb=None):
        from actors.driver import DebateRunner

        with DebateRunner() as runner:
            return runner.run(cfg, progress_cb=progress_cb)

    def _out(self, name: str) -> Path:
        return self.work / name.replace(" ", "-").replace(":", "")

    def need_gpus(self, n: int = 1) -> None:
        if self.gpus < n:
            raise Skip(f"needs {n} GPU{'s' if n > 1 else ''}; Ray sees {self.gpus:g}")

    def one_replica(self, backend: str) -> str:
        device = "gpu" if self.gpus else "cpu"
        res = self._engine_run(_config(backend, self.model, self._out(f"{backend}-one"), device=device))
        (rep,) = _replicas(res)
        if self.gpus and not rep.get("gpu_ids"):
            raise AssertionError(f"the replica holds no GPU: {rep}")
        where = f"GPU {','.join(rep['gpu_ids'])}" if rep.get("gpu_ids") else "CPU"
        return f"{_answered(res)}; replica on {where}, {res.dtype}"

    def shared_gpu(self, backend: str) -> str:
        self.need_gpus()
        res = self._engine_run(
            _config(backend, self.model, self._out(f"{backend}-shared"), replicas=2, gpus_per_replica=0.5)
        )
        reps = _replicas(res)
        ids = {tuple(r.get("gpu_ids") or ()) for r in reps}
        if len(reps) != 2 or len(ids) != 1 or not next(iter(ids)):
            raise AssertionError(f"the two replicas did not share one GPU: {[r.get('gpu_ids') for r in reps]}")
        util = sorted({e.get("gpu_memory_utilization") for e in res.engine})
        if backend == "vllm" and util != [0.45]:
            raise AssertionError(f"vLLM's gpu_memory_utilization {util}, expected [0.45] (0.9 x 0.5)")
        return f"{_answered(res)}; both on GPU {next(iter(ids))[0]}" + (
            f", utilization {util[0]}" if backend == "vllm" else ""
        )

    def embedder(self, backend: str) -> str:
        self.need_gpus()
        res = self._engine_run(
            _config(
                backend,
                self.model,
                self._out(f"{backend}-embedder"),
                protocol="s2mad",
                agents=4,
                rounds=3,
                groups="2+2",
                similarity="embedding",
                gpus_per_replica=0.5,
            )
        )
        (emb,) = [e for e in res.placement if e["role"] == "embedder"]
        if emb.get("device") != "cuda":
            raise AssertionError(f"the embedder ran on {emb.get('device')}, with half a GPU free")
        return f"{_answered(res)}; embedder on GPU {','.join(emb.get('gpu_ids') or ['?'])}"

    def tensor_parallel(self, backend: str) -> str:
        if backend != "vllm":
            raise Skip("tensor parallelism is vLLM's")
        self.need_gpus(2)
        res = self._engine_run(_config(backend, self.model, self._out(f"{backend}-tp2"), tensor_parallel=2))
        (rep,) = _replicas(res)
        return f"{_answered(res)}; bundles on {len(set(rep.get('bundle_nodes') or []))} node(s)"

    def killed(self, backend: str) -> str:
        """SIGKILL the replica's process after a few calls; the run must end with every call answered
        and the dead replica's engine processes gone (Ray's subreaper, within ~10 s)."""
        import ray

        from actors.driver import DebateRunner

        device = "gpu" if self.gpus else "cpu"
        killed: dict[str, Any] = {}
        with DebateRunner() as runner:
            cfg = _config(
                backend, self.model, self._out(f"{backend}-killed"), device=device, limit=8, rounds=3, max_tokens=32
            )
            warm = runner.run(_config(backend, self.model, self._out(f"{backend}-killed-warm"), device=device, limit=1))
            (handle,) = runner._replicas.values()
            info = ray.get(handle.info.remote())
            local = info.get("node_ip") == ray.util.get_node_ip_address()
            children = _engine_processes(info["pid"]) if local else set()

            def kill(state):
                if not killed and state["calls"] >= 1:  # some calls answered, the rest still to come
                    killed["at"] = state["calls"]
                    if local:
                        os.kill(info["pid"], signal.SIGKILL)
                    else:
                        ray.kill(handle, no_restart=False)

            res = runner.run(cfg, progress_cb=kill)
            if not killed or killed["at"] >= res.summary["n_calls"]:
                raise AssertionError("the run ended before the replica could be killed")
            after = ray.get(handle.info.remote())
        detail = (
            f"{_answered(warm)} + {_answered(res)}; killed after {killed['at']} calls, restarted as pid {after['pid']}"
        )
        if not local:
            return detail + " (on another node: its engine processes not checked)"
        import psutil

        deadline = time.time() + 30
        left = {p for p in children if psutil.pid_exists(p)}
        while left and time.time() < deadline:
            time.sleep(0.5)
            left = {p for p in left if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE}
        if left:
            raise AssertionError(f"engine processes of the killed replica still alive after 30 s: {sorted(left)}")
        return detail + f"; its {len(children)} engine process(es) gone"

    def all(self) -> list[dict[str, Any]]:
        for backend in self.backends:
            self.run(f"{backend}: one replica", lambda b=backend: self.one_replica(b))
            self.run(f"{backend}: replicas share a GPU", lambda b=backend: self.shared_gpu(b))
            if backend == self.backends[0]:
                self.run(f"{backend}: embedder on the GPU (S2-MAD)", lambda b=backend: self.embedder(b))
            if backend == "vllm":
                self.run(f"{backend}: tensor parallel 2", lambda b=backend: self.tensor_parallel(b))
            self.run(f"{backend}: replica killed mid-run", lambda b=backend: self.killed(b))
        return self.results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="a local model folder or a hub id (default: a tiny random-weight Llama built here)")
    p.add_argument(
        "--backends",
        default=",".join(BACKENDS),
        help="comma list among vllm,transformers (default: both; those not installed are skipped)",
    )
    p.add_argument("--out", default="bench/gpu_check.json", help="where the JSON goes")
    args = p.parse_args(argv)

    from actors.driver import init_ray

    wanted = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = set(wanted) - set(BACKENDS)
    if unknown:
        p.error(f"--backends: unknown {sorted(unknown)}; use {','.join(BACKENDS)}")
    backends = [b for b in wanted if b in installed_backends()]
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        work = Path(tmp)
        model = args.model
        if model is None:
            from tests.support.tiny_vlm import build_tiny_text_model

            model = str(build_tiny_text_model(work / "tiny-llama"))
        init_ray()
        gpus = ray_gpus()
        names = f" ({'; '.join(gpus['torch_names'])})" if gpus["torch_names"] else ""
        print(f"GPUs Ray sees: {gpus['total']:g} on {len(gpus['nodes'])} node(s){names}")
        missing = [b for b in wanted if b not in backends]
        if missing:
            print(f"not installed here (skipped): {', '.join(missing)}")
        checks = Checks(model, work, gpus["total"], backends)
        results = checks.all()
    import json

    import ray

    from backends.installed import vllm_build

    res = {
        "machine": machine_info(),
        "gpus": gpus,
        "vllm_build": vllm_build(),
        "model": args.model or "tiny random Llama",
        "backends": backends,
        "not_installed": missing,
        "checks": results,
        "ray": ray.__version__,
        "command": " ".join(["gpu_check.py", *(argv if argv is not None else sys.argv[1:])]),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2))
    counts = {s: sum(r["status"] == s for r in results) for s in ("PASS", "FAIL", "SKIP")}
    print(f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped; saved {args.out}")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
