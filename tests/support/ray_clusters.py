"""Multi-node Ray clusters on this machine for placement tests (``ray.cluster_utils.Cluster``: its
nodes may declare GPUs and custom resources they do not have)."""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def fake_cluster(head_cpus: int = 2):
    """A cluster with a CPU head, the driver connected to it; yields the ``Cluster`` (add nodes with
    ``add_node``). The session's local Ray instance (tests/conftest.py) gives way meanwhile and is
    started again afterwards."""
    import ray
    from ray.cluster_utils import Cluster

    was_local = ray.is_initialized()
    if was_local:
        ray.shutdown()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": head_cpus, "include_dashboard": False})
    ray.init(address=c.address, logging_level="ERROR", log_to_driver=False)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()
        if was_local:  # as tests/conftest.py started it
            from actors.driver import init_ray

            init_ray(num_cpus=2, log_to_driver=False)
