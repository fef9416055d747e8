"""The typed view of RunConfig mypy reads (engine/run_config_fields.pyi) matches the options."""

import ast
import dataclasses
import importlib.util

from engine.config import RunConfig
from tests.support.paths import ROOT


def _writer():
    spec = importlib.util.spec_from_file_location("write_config_stub", ROOT / "scripts" / "write_config_stub.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_stub_is_current():
    writer = _writer()
    assert writer.STUB.read_text() == writer.stub_text(), (
        "engine/run_config_fields.pyi is out of date: run .venv/bin/python scripts/write_config_stub.py"
    )


def test_stub_states_every_field_with_its_annotation():
    tree = ast.parse((ROOT / "engine" / "run_config_fields.pyi").read_text())
    (cls,) = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    stated = {node.target.id: ast.unparse(node.annotation) for node in cls.body if isinstance(node, ast.AnnAssign)}
    assert stated == {f.name: f.type for f in dataclasses.fields(RunConfig)}
    assert len(stated) > 70  # engine and protocol options alike
