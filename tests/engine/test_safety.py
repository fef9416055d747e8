"""Safety: no eval/exec anywhere in the project, no network listener unless asked."""

import ast
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
