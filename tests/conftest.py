"""Fixtures shared by every area (no module imports this file: helpers are in tests.support), and
the ``ray`` marker's enforcement.

A test that starts Ray must be marked ``ray`` so that ``pytest -m "not ray and not slow"`` is a
Ray-free inner loop. Tests using a Ray-starting fixture (:data:`RAY_FIXTURES`) get the marker at
collection; any other test that is not marked and starts Ray during its setup or call, in this
process (``ray.is_initialized()``) or in a subprocess (a new Ray session folder under the
session's own ``RAY_TMPDIR``), fails naming itself.
"""

import gc
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# Fixtures that start Ray: a test using one (directly or through another fixture) is a Ray test.
RAY_FIXTURES = {"ray_local"}


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray instance for the whole test session, started as the engine starts it
    (``init_ray``: no dashboard, a dead worker's processes die with it), on 2 CPUs and no GPU
    whatever the machine has (tests/support/ray_clusters.py). A test that runs the engine in this
    process uses it (directly or through a fixture), so that whichever test starts Ray first, every
    such test sees the same Ray."""
    ray = pytest.importorskip("ray")
    from tests.support.ray_clusters import start_local_ray

    start_local_ray()
    yield ray
    ray.shutdown()


@pytest.fixture
def no_ray(monkeypatch):
    """For a test of ``debate``'s input checks: starting Ray fails the test (every input is
    checked before Ray starts), so a check that came too late fails fast instead of starting Ray."""
    import actors.driver

    def refuse(*args, **kwargs):
        raise AssertionError("Ray was started: an input check came too late")

    monkeypatch.setattr(actors.driver, "init_ray", refuse)


@pytest.fixture(scope="module")
def sizes():
    """The cost model's measured prompt constants on the simulated backend (tests/support/cost.py)."""
    from backends.simulated_backend import count_tokens
    from engine import cost_predict
    from engine.prompts import PromptSet
    from tests.support.cost import words

    return cost_predict.measure(PromptSet.for_task("numeric"), words, count_tokens)


# --- without pytest-timeout ---------------------------------------------------------------------


def pytest_addoption(parser, pluginmanager):
    """Where pytest-timeout (the test extra) is missing, as on a machine that got its packages
    elsewhere, its ``timeout`` setting in pyproject.toml is declared here, unused, so that pytest
    does not warn about an unknown option; tests then run without a time limit."""
    if not pluginmanager.hasplugin("timeout"):
        parser.addini("timeout", "pytest-timeout's time limit (pytest-timeout is not installed: unused)")


# --- the ray marker -----------------------------------------------------------------------------

_OWN_TMPDIR: str | None = None


def pytest_configure(config):
    """Ray started by this session, here or in a subprocess that inherits the environment, keeps
    its session folders under one ``RAY_TMPDIR`` of the session's own (a user's is kept), so that a
    new folder there means Ray started; other Ray users on the machine do not count. Without
    pytest-timeout, its ``timeout`` marker is declared, unused (see :func:`pytest_addoption`)."""
    global _OWN_TMPDIR
    if not config.pluginmanager.hasplugin("timeout"):
        config.addinivalue_line("markers", "timeout(seconds): pytest-timeout's limit (not installed: unused)")
    if not os.environ.get("RAY_TMPDIR"):
        # short, under /tmp as Ray's default: Ray's Unix socket paths must stay under 108 bytes
        _OWN_TMPDIR = tempfile.mkdtemp(prefix="pytest-ray-", dir="/tmp" if os.path.isdir("/tmp") else None)
        os.environ["RAY_TMPDIR"] = _OWN_TMPDIR


def pytest_collection_finish(session):
    """Move what collection made (the modules imported, ~2,400 test items) out of the cyclic
    garbage collector's sight, and collect young objects less often: otherwise every full
    collection walks them again. Only this test process is tuned; the engine keeps Python's
    defaults."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 10, 10)


def pytest_unconfigure(config):
    if _OWN_TMPDIR:
        shutil.rmtree(_OWN_TMPDIR, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before the -m selection deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if RAY_FIXTURES.intersection(getattr(item, "fixturenames", ())) and not item.get_closest_marker("ray"):
            item.add_marker(pytest.mark.ray)


def _ray_sessions() -> set[str]:
    folder = Path(os.environ.get("RAY_TMPDIR", "/tmp")) / "ray"
    try:
        return {p.name for p in folder.iterdir() if p.name.startswith("session_") and p.name != "session_latest"}
    except OSError:
        return set()


def _ray_up() -> bool:
    """``ray.is_initialized()``, read where it reads (tests monkeypatch the function itself)."""
    if "ray" not in sys.modules:  # not imported: not started (and no import cost here)
        return False
    worker = getattr(sys.modules.get("ray._private.worker"), "global_worker", None)
    return bool(worker.connected) if worker is not None else sys.modules["ray"].is_initialized()


def _guard(item, phase):
    if item.get_closest_marker("ray"):
        return (yield)
    up, sessions = _ray_up(), _ray_sessions()
    result = yield
    started_here = not up and _ray_up()
    new = _ray_sessions() - sessions
    if started_here or new:
        if started_here:
            sys.modules["ray"].shutdown()  # the following tests stay Ray-free
        where = "in this process" if started_here else f"in a subprocess ({', '.join(sorted(new))})"
        pytest.fail(
            f"{item.nodeid} started Ray {where} during its {phase} but is not marked `ray`: "
            "add @pytest.mark.ray (or use the ray_local fixture) so `-m 'not ray'` leaves it out",
            pytrace=False,
        )
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _guard(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _guard(item, "call"))
