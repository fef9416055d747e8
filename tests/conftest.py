import os
from pathlib import Path

import pytest

DATA_DIR = Path(os.environ.get("DEBATE_DATA_DIR", Path(__file__).resolve().parents[1].parent / "shared" / "data"))


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray instance for the whole test session, started as the engine starts it
    (``init_ray``: no dashboard, a dead worker's processes die with it), on 2 CPUs."""
    ray = pytest.importorskip("ray")
    from actors.driver import init_ray

    init_ray(num_cpus=2, log_to_driver=False)
    yield ray
    ray.shutdown()
