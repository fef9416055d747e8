"""``debate serve``: load a model once, and let later runs and sweeps reuse it.

``debate serve`` takes the model flags of ``debate run`` (``--backend``, ``--model``/``--models``,
``--replicas``, the engine settings, the GPU options, ``--config``) and starts the replicas such
a run would start (:meth:`actors.driver.DebateRunner.replicas_for`) as *served* replicas
(:mod:`actors.served`: named, detached actors), so they stay up after the command returns.
Every later run on that Ray uses the served replica of the setup it wants, and says so
(``reusing served replica NAME``; the runs row's ``placement`` names it), or starts its own and
says why (a setting differs, the served one does not answer); it leaves them running when it
ends. Results do not depend on it: a replica answers a request from the request alone (its
seed), whoever started it. ``debate serve --list`` lists them, ``--stop`` ends them.

Without a Ray to join (no ``--ray-address``, no ``RAY_ADDRESS``, no ``ray start`` on this
machine), ``debate serve`` starts one of its own (:func:`start_head`): a ``ray start --head
--block`` process in a session of its own, on the loopback address like every Ray the engine
starts (:mod:`actors.cluster`), not watched by the reaper (:mod:`actors.reaper`) that ends a run's
own Ray. It is recorded in the cluster (:data:`HEAD_KEY`), and ``debate serve --stop`` ends it
once it has stopped the last served replica and no other driver is connected.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from actors.cluster import RAY_WORKER_CLEANUP
from actors.served import ServeError, served_replicas, served_setup, settings_text, stop_served
from engine.config import RunConfig

log = logging.getLogger(__name__)

HEAD_KEY = "debate-serve-head"  # Ray's internal KV: the Ray head that debate serve started
HEAD_START_S = 180.0  # how long ``ray start --head`` may take to come up
HEAD_STOP_S = 60.0  # how long it may take to end its processes after SIGTERM


# ------------------------------------------------------------------------------ Ray head
def free_port() -> int:
    """A TCP port free on the loopback address now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def running_local_ray() -> str | None:
    """The address of the Ray that ``ray start`` (or ``debate serve``) started on this machine, as
    ``ray.init()`` would join it (None: none)."""
    # function-level: importing ray._private here keeps it off start-up
    from ray._private import services

    address = services.find_bootstrap_address(None)
    return str(address) if address else None


def start_head(timeout_s: float = HEAD_START_S) -> tuple[str, subprocess.Popen]:
    """Start a Ray head for served replicas: ``ray start --head --block`` on a free port, on the
    loopback address (as :func:`actors.cluster.local_ray_on_loopback` puts the engine's own Ray),
    without dashboard, killing a dead worker's processes (:data:`actors.cluster.RAY_WORKER_CLEANUP`),
    in a session of its own so that neither Ctrl-C nor the end of this command reaches it. Its
    output goes to a log file in the temp folder. Returns (address, process) once Ray is up;
    :class:`ServeError` (one line, the log's last line) if it exits or does not come up."""
    # function-level: importing ray._private here keeps it off start-up
    from ray._private import ray_constants

    port = free_port()
    logs = Path(tempfile.gettempdir()) / "debate-serve"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"ray-head-{port}.log"
    env = {**os.environ, **RAY_WORKER_CLEANUP, ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR: "0"}
    env.pop("RAY_ADDRESS", None)
    command = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block", f"--port={port}"]
    command += ["--include-dashboard=false", "--disable-usage-stats"]
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    log.info("starting a Ray head on 127.0.0.1:%d (pid %d, log %s)", port, proc.pid, log_path)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace")
        if "Ray runtime started" in text:
            return f"127.0.0.1:{port}", proc
        if proc.poll() is not None:
            break
        time.sleep(0.25)
    else:
        proc.terminate()
    lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
    raise ServeError(
        f"debate serve: 'ray start --head' did not come up ({lines[-1][:300] if lines else 'no output'}); "
        f"its log: {log_path}"
    )


def head_record(address: str, proc: subprocess.Popen) -> dict[str, Any]:
    """What ``debate serve --stop`` needs to end a Ray head started here: its address, the pid
    and start time of its ``ray start`` process, and this host."""
    try:
        started = psutil.Process(proc.pid).create_time()
    except psutil.NoSuchProcess:
        started = 0.0
    return {"address": address, "pid": proc.pid, "started": started, "host": socket.gethostname()}


def record_head(record: dict[str, Any]) -> None:
    """Note in the cluster that its Ray head is debate serve's (:func:`head_record`)."""
    # function-level: importing ray.experimental.internal_kv here keeps it off start-up
    from ray.experimental.internal_kv import _internal_kv_put

    _internal_kv_put(HEAD_KEY, json.dumps(record), overwrite=True)


def recorded_head() -> dict[str, Any] | None:
    """The record :func:`record_head` wrote in the cluster this process is connected to (None:
    its Ray was not started by debate serve)."""
    # function-level: importing ray.experimental.internal_kv here keeps it off start-up
    from ray.experimental.internal_kv import _internal_kv_get

    raw = _internal_kv_get(HEAD_KEY)
    return json.loads(raw) if raw else None


def other_drivers() -> int:
    """Drivers connected to the cluster now, this one left out (a run using served replicas)."""
    # function-level: importing ray here keeps it off start-up
    import ray

    # function-level: importing ray._private.state here keeps it off start-up
    from ray._private.state import jobs

    own = ray.get_runtime_context().get_job_id()
    return sum(1 for j in jobs() if not j.get("IsDead") and j.get("JobID") != own)


def stop_head(record: dict[str, Any], timeout_s: float = HEAD_STOP_S) -> str:
    """End the Ray head of ``record`` (SIGTERM to its ``ray start --block`` process, which stops
    every process of that Ray) if it runs on this host, and forget it as the Ray ``ray.init()``
    joins; call after disconnecting. Returns the line to print."""
    # function-level: importing ray._common.utils here keeps it off start-up
    from ray._common.utils import reset_ray_address

    # function-level: importing ray._private.utils here keeps it off start-up
    from ray._private.utils import read_ray_address

    address = record["address"]
    if record.get("host") != socket.gethostname():
        return f"the Ray head at {address} runs on {record.get('host')}: end it there ('ray stop')"
    try:
        proc = psutil.Process(int(record["pid"]))
        if abs(proc.create_time() - float(record["started"])) > 1.0:
            raise psutil.NoSuchProcess(int(record["pid"]))
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout_s)
    except psutil.NoSuchProcess:
        return f"the Ray head at {address} had already ended"
    except psutil.TimeoutExpired:
        return f"the Ray head at {address} (pid {record['pid']}) did not end within {timeout_s:g} s of SIGTERM"
    if read_ray_address(None) == address:
        reset_ray_address(None)
    return f"stopped the Ray head at {address} that debate serve started"


# ------------------------------------------------------------------------------ the commands
def check_serve_inputs(cfg: RunConfig) -> None:
    """What ``debate serve`` checks before Ray starts: the configuration and the backend's model
    files or endpoint (a run checks these too, with its data set and output folder)."""

    cfg.validate()
    preflight = cfg.backend_spec.preflight
    if preflight is not None:
        preflight(cfg)


def serve(cfg: RunConfig, echo=print) -> int:
    """``debate serve``: join the Ray of ``--ray-address`` (else ``RAY_ADDRESS``, else one that
    ``ray start`` started on this machine) or start one (:func:`start_head`), start the replicas a
    run with ``cfg`` would start as served replicas (those served already are kept) and print one
    line per replica and the address to pass. Returns 0. All or nothing: when a replica cannot
    load (:class:`actors.driver.ReplicaStartError`) or Ctrl-C stops the command, the replicas it
    started are stopped, and a head it started ends with them."""
    # function-level: importing ray here keeps it off start-up
    import ray

    # function-level: importing pyarrow, pyarrow.compute, pyarrow.parquet here keeps it off start-up
    from actors.driver import DebateRunner, init_ray

    check_serve_inputs(cfg)
    address = cfg.cluster.ray_address or os.environ.get("RAY_ADDRESS") or running_local_ray()
    head, runner = None, None
    if address is None and not ray.is_initialized():
        address, proc = start_head()
        head = head_record(address, proc)
    try:
        init_ray(address, reap=False)  # the replicas' Ray outlives this command
        if head is not None:
            record_head(head)
        runner = DebateRunner(address)
        t0 = time.perf_counter()
        replicas = runner.replicas_for(cfg, cfg.run_models(), serve=True)
        took = time.perf_counter() - t0
    except BaseException:
        if head is not None:  # nothing is served on it: it goes too
            ray.shutdown()
            log.warning("%s", stop_head(head))
        elif runner is not None and ray.is_initialized():
            started = {name for name, kept in runner.served.values() if not kept}
            stop_served([s for s in served_replicas() if s.name in started])
        raise
    for spec in (s for specs in replicas.layout.values() for s in specs):
        name, kept = runner.served[spec.key(cfg)]
        setup = served_setup(cfg, spec)
        how = "already served" if kept else f"started in {took:.1f} s"
        echo(f"{name}: {spec.model} replica {spec.index} ({cfg.sampling.backend}; {settings_text(setup)}) {how}")
    where = ray.get_runtime_context().gcs_address
    echo(
        f"Ray at {where}: run with --ray-address {where} (or auto on this machine) and the same model flags to "
        f"reuse them; 'debate serve --list' lists them, 'debate serve --stop' ends them"
    )
    return 0


def join_existing(address: str | None, echo=print) -> bool:
    """Connect to the Ray holding served replicas (``address``, else ``RAY_ADDRESS``, else the one
    ``ray start`` started on this machine) without starting one; False (a line said so) when there
    is none. An address given that nothing answers is :class:`actors.driver.RayAddressError`."""
    # function-level: importing ray here keeps it off start-up
    import ray

    # function-level: importing pyarrow, pyarrow.compute, pyarrow.parquet here keeps it off start-up
    from actors.driver import RayAddressError, init_ray

    if ray.is_initialized():
        return True
    given = address or os.environ.get("RAY_ADDRESS")
    found = given or running_local_ray()
    if not found:
        echo("no Ray runs on this machine (nor --ray-address / RAY_ADDRESS): nothing is served")
        return False
    try:
        init_ray(found, reap=False)
    except RayAddressError:
        if given:
            raise
        echo(f"no Ray answers at {found} (the last 'ray start' on this machine): nothing is served")
        return False
    return True


def list_command(address: str | None, echo=print) -> int:
    """``debate serve --list``: one line per served replica (name, model, replica, backend,
    settings, where it runs, or that it does not answer)."""
    if not join_existing(address, echo):
        return 0
    served = served_replicas()
    if not served:
        echo("nothing is served")
    for s in served:
        setup = s.setup
        if s.info is None or setup is None:
            echo(f"{s.name}: does not answer (dead or restarting)")
            continue
        where = f"pid {s.info.get('pid')} on {s.info.get('node_ip')}"
        echo(
            f"{s.name}: {setup['model']} replica {setup['index']} ({setup['backend']}; {settings_text(setup)}) {where}"
        )
    return 0


def stop_command(address: str | None, models: list[str] | None, echo=print) -> int:
    """``debate serve --stop``: end the served replicas (of ``models`` only, when given), one line
    each; with none left, end the Ray head that debate serve started unless another driver uses it.
    Nothing served: one line, 0."""
    # function-level: importing ray here keeps it off start-up
    import ray

    if not join_existing(address, echo):
        return 0
    served = served_replicas()
    chosen = [s for s in served if models is None or (s.setup or {}).get("model") in models]
    if not chosen:
        what = f" of {', '.join(models)}" if models else ""
        echo(f"nothing{what} is served" + (f" (served: {', '.join(s.name for s in served)})" if served else ""))
    stop_served(chosen)
    for s in chosen:
        setup = s.setup
        echo(f"stopped {s.name}" + (f": {setup['model']} replica {setup['index']}" if setup else ""))
    record = recorded_head()
    if len(chosen) < len(served) or record is None:
        return 0
    others = other_drivers()
    if others:
        echo(f"the Ray head at {record['address']} stays up: {others} other driver(s) use it")
        return 0
    ray.shutdown()
    echo(stop_head(record))
    return 0
