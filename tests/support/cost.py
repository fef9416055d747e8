"""The cost-model tests' shared sizes (tests/engine/test_cost_model.py, tests/protocols/test_reconcile.py;
their ``sizes`` fixture is in tests/conftest.py)."""

REPLY = 40


def words(text: str) -> int:
    return len(text.split())
