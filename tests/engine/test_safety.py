"""Safety: no eval/exec anywhere in the project, no network listener unless asked."""

import ast
import ipaddress
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {"eval", "exec", "compile", "__import__"}


def project_files():
    for pkg in ("engine", "actors", "topologies", "scripts"):
        yield from sorted((ROOT / pkg).rglob("*.py"))


def test_no_eval_or_exec_in_project_code():
    """Model text is only ever parsed (engine/extract.py), never run: no eval/exec/compile call
    and no dynamic import by name anywhere in the project."""
    found = []
    files = list(project_files())
    assert len(files) > 30
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                # eval(...), exec(...), builtins.eval(...); not methods such as torch's model.eval()
                if isinstance(f, ast.Name) and f.id in FORBIDDEN:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {f.id}()")
                elif isinstance(f, ast.Attribute) and f.attr in FORBIDDEN and getattr(f.value, "id", "") == "builtins":
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} builtins.{f.attr}()")
    assert not found, found


@pytest.mark.ray
@pytest.mark.slow  # a Ray start of its own in a subprocess (~20 s)
def test_engine_starts_ray_without_the_dashboard_or_other_http_listener():
    """``init_ray`` (what ``debate run`` uses) starts Ray without the dashboard web UI: nothing
    answers HTTP on the dashboard port. (Ray's own gRPC ports and its per-node agent remain:
    Ray needs them; see README "Safety".) Run in a fresh process so this test owns the Ray instance."""
    code = """
import socket, urllib.request, ray
from actors.driver import init_ray
init_ray()
s = socket.socket(); s.settimeout(1)
listening = s.connect_ex(("127.0.0.1", 8265)) == 0
try:
    urllib.request.urlopen("http://127.0.0.1:8265/", timeout=2); http = True
except OSError:
    http = False
print("LISTEN", listening, "HTTP", http)
ray.shutdown()
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "LISTEN False HTTP False" in out.stdout, out.stdout + out.stderr[-2000:]
    # and the same check can fail: a Ray started with the dashboard does answer there
    with_dash = code.replace(
        "init_ray()", "ray.init(include_dashboard=True, dashboard_host='127.0.0.1', dashboard_port=8265)"
    )
    out = subprocess.run([sys.executable, "-c", with_dash], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "LISTEN True HTTP True" in out.stdout, out.stdout + out.stderr[-2000:]


def test_only_a_ray_that_init_ray_starts_here_is_put_on_loopback(tmp_path):
    """The loopback node IP is Ray's own macOS/Windows default, switched on around ``ray.init``
    only when it starts a new local Ray: joining a cluster (an address, or a ``ray start`` of this
    machine, found through its address file) is left as Ray does it, and the switch is undone."""
    pytest.importorskip("ray")
    from ray._private import ray_constants

    from actors.cluster import local_ray_on_loopback

    before = ray_constants.ENABLE_RAY_CLUSTER
    with local_ray_on_loopback(None, str(tmp_path)):
        assert ray_constants.ENABLE_RAY_CLUSTER is False
    assert ray_constants.ENABLE_RAY_CLUSTER is before
    with local_ray_on_loopback("192.0.2.10:6379", str(tmp_path)):
        assert ray_constants.ENABLE_RAY_CLUSTER is before
    (tmp_path / "ray_current_cluster").write_text("192.0.2.10:6379\n")  # what `ray start --head` leaves
    with local_ray_on_loopback(None, str(tmp_path)):
        assert ray_constants.ENABLE_RAY_CLUSTER is before
    with pytest.raises(KeyError), local_ray_on_loopback(None, str(tmp_path / "none")):
        raise KeyError("ray.init failed")
    assert ray_constants.ENABLE_RAY_CLUSTER is before


# The processes of a local Ray that listen on a port: the driver's and an actor's core worker, and
# Ray's own servers (the monitor's and the dashboard head's metrics exporters listen on fixed ports
# that another Ray on this machine may hold: not required)
RAY_LISTENERS = ("driver", "gcs_server", "raylet", "ray::DashboardAgent", "ray::RuntimeEnvAgent", "ray::Probe")

# Lists every listening TCP socket and unconnected UDP socket of this driver and of the Ray
# processes it started (all its descendants), once those of argv[1] listen (60 s at most).
_LIST_RAY_SOCKETS = """
import json, os, sys, time, psutil, ray
from actors.driver import init_ray

init_ray(num_cpus=1, log_to_driver=False)

@ray.remote
class Probe:
    def ready(self):
        return True

probe = Probe.remote()
ray.get(probe.ready.remote(), timeout=120)

def label(p):
    cmd = p.cmdline()
    return "driver" if p.pid == os.getpid() else next(
        (os.path.basename(a) for a in cmd if a.endswith(".py")), os.path.basename(cmd[0]) if cmd else p.name())

def listening():
    me = psutil.Process()
    found = []
    for p in [me, *me.children(recursive=True)]:
        try:
            name, conns = label(p), p.net_connections(kind="inet")
        except psutil.Error:
            continue  # a process that ended meanwhile
        for c in conns:
            if c.status == psutil.CONN_LISTEN or (c.type == 2 and not c.raddr):
                found.append([name, "udp" if c.type == 2 else "tcp", c.laddr.ip, c.laddr.port])
    return found

NEEDED = set(json.loads(sys.argv[1]))
deadline = time.monotonic() + 60
found = listening()
while not NEEDED <= {f[0] for f in found} and time.monotonic() < deadline:
    time.sleep(1)  # the agents may open their ports after ray.init returns
    found = listening()
print("SOCKETS", json.dumps(found))
ray.shutdown()
"""


def _is_loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(addr, "ipv4_mapped", None)  # ::ffff:127.0.0.1, a v6 socket bound to IPv4 loopback
    return (mapped or addr).is_loopback


@pytest.mark.ray  # a Ray start of its own in a subprocess (~10 s)
def test_the_engines_local_ray_listens_on_loopback_only():
    """The Ray ``init_ray`` starts on this machine (no --ray-address) listens on no other address
    than loopback: every listening socket of its GCS, raylet, agents, metrics exporters, the
    driver's and an actor's worker, none on 0.0.0.0/:: or the LAN address (Ray's Linux default)."""
    out = subprocess.run(
        [sys.executable, "-c", _LIST_RAY_SOCKETS, json.dumps(RAY_LISTENERS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = next((x for x in out.stdout.splitlines() if x.startswith("SOCKETS ")), None)
    assert line, out.stdout + out.stderr[-3000:]
    sockets = json.loads(line.removeprefix("SOCKETS "))
    # the check saw Ray's servers: each listens on at least one port
    assert set(RAY_LISTENERS) <= {name for name, *_ in sockets}, sockets
    exposed = [s for s in sockets if not _is_loopback(s[2])]
    assert not exposed, f"Ray listens beyond this machine: {exposed} (all: {sockets})"
