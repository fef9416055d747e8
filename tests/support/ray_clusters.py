"""The test session's Ray: the local instance (:func:`start_local_ray`, tests/conftest.py's
``ray_local``) and multi-node clusters on this machine for placement tests
(``ray.cluster_utils.Cluster``: its nodes may declare GPUs and custom resources they do not have).

Both are the same on every machine: the local instance has 2 CPUs and no GPU whatever the machine
has (a test that wants GPUs declares them on a fake cluster's nodes), and a fake cluster's head
has no GPU either."""

from __future__ import annotations

import contextlib
import os

# The local instance: 2 CPUs (the CI machine's), no GPU (a GPU the machine has must not change
# what a test sees: --device auto would put replicas on it)
LOCAL_RAY = {"num_cpus": 2, "num_gpus": 0, "log_to_driver": False}


def start_local_ray() -> None:
    """Start the session's local Ray as the engine starts it (``init_ray``: no dashboard, a dead
    worker's processes die with it); nothing if Ray is up in this process already."""
    from actors.driver import init_ray

    init_ray(**LOCAL_RAY)


@contextlib.contextmanager
def fake_cluster(head_cpus: int = 2):
    """A cluster with a CPU head (no GPU, even on a machine that has one), the driver connected to
    it; yields the ``Cluster`` (add nodes with ``add_node``). The session's local Ray instance gives
    way meanwhile and is started again afterwards. ``CUDA_VISIBLE_DEVICES`` is unset meanwhile: Ray
    refuses to start a node declaring more GPUs than that variable lists (a GPU machine often sets
    it), and the declared GPUs are not used."""
    import ray
    from ray.cluster_utils import Cluster

    was_local = ray.is_initialized()
    if was_local:
        ray.shutdown()
    visible = os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    try:
        c = Cluster(
            initialize_head=True, head_node_args={"num_cpus": head_cpus, "num_gpus": 0, "include_dashboard": False}
        )
        ray.init(address=c.address, logging_level="ERROR", log_to_driver=False)
        try:
            yield c
        finally:
            ray.shutdown()
            c.shutdown()
    finally:
        if visible is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = visible
        if was_local:
            start_local_ray()
