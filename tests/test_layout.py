"""The suite's layout: no module under tests/ imports a conftest.py or a test module (shared code
lives in tests.support, fixtures in conftest.py files that pytest alone loads)."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _module_name(path: Path) -> str:
    return ".".join(("tests", *path.relative_to(TESTS).with_suffix("").parts))


def _imported(source: str, module: str) -> list[tuple[int, str]]:
    """(line, dotted name) of every module, and every name from a module, that ``source`` (the
    text of module ``module``) imports, relative imports resolved."""
    package = module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
            found += [(node.lineno, base)] + [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return found


def _forbidden(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return last == "conftest" or last.startswith("test_")


def test_no_module_imports_a_conftest_or_a_test_module():
    bad = [
        f"{path.relative_to(TESTS.parent)}:{line}: imports {name}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, name in _imported(path.read_text(), _module_name(path))
        if _forbidden(name)
    ]
    assert not bad, "import shared code from tests.support instead:\n" + "\n".join(bad)


def test_the_check_sees_such_imports():
    source = (
        "from tests.conftest import DATA_DIR\nfrom . import test_x\nimport test_y\n"
        "from tests import conftest\nfrom tests.support.rows import complete_rows\nimport os\n"
    )
    names = [name for _, name in _imported(source, "tests.engine.test_probe")]
    assert [n for n in names if _forbidden(n)] == ["tests.conftest", "tests.engine.test_x", "test_y", "tests.conftest"]


def test_every_repository_path_that_the_docs_and_code_name_exists():
    """README, docs, cluster.yaml, pyproject.toml and the code name test files and scripts by
    path (``tests/actors/test_faults.py``, ``scripts/lint.sh``): each such path exists, so moving
    a file without updating what points at it fails here."""
    import re

    root = TESTS.parent
    sources = [root / "README.md", root / "cluster.yaml", root / "pyproject.toml", *(root / "docs").rglob("*.md")]
    for package in ("engine", "actors", "backends", "topologies", "scripts", "tests"):
        sources += (root / package).rglob("*.py")
    pattern = re.compile(
        r"(?<![\w./-])((?:tests|scripts|docs|engine|actors|backends|topologies)/[\w/.-]+\.(?:py|sh|md))(?!\w)"
    )
    missing = sorted(
        f"{src.relative_to(root)}: {m}"
        for src in sources
        for m in set(pattern.findall(src.read_text(errors="replace")))
        if not (root / m).exists()
    )
    assert not missing, "paths named but not in the repository:\n" + "\n".join(missing)
