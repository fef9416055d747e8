import os
from pathlib import Path

import pytest

DATA_DIR = Path(os.environ.get("DEBATE_DATA_DIR", Path(__file__).resolve().parents[1].parent / "shared" / "data"))


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray instance for the whole test session (dashboard off)."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield ray
    ray.shutdown()
