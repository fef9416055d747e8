"""Where the replicas run on the Ray cluster: resources, replicas, devices."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.config.fields import ConfigPart, config_part, option
from engine.options import MAX_CPUS, MAX_GPUS

DEVICES = ("auto", "cpu", "gpu")
EMBEDDING_DEVICES = ("auto", "cpu", "cuda")


@config_part("cluster", hashed=False)
@dataclass
class ClusterConfig(ConfigPart):
    """Placement on the cluster: none of it changes results (the run id leaves it out)."""

    placement_resources: dict[str, Any] = option({}, "where each model's replicas run (YAML only)", cli=False)
    replica_cpus: float | None = option(
        None,
        (
            "CPUs each replica reserves on CPU runs (default: the largest node's CPUs, as Ray counts them, split "
            "evenly between the run's replicas)"
        ),
        low=0,
        high=MAX_CPUS,
        low_open=True,
    )
    gpus_per_replica: float | None = option(
        None,
        (
            "GPUs each replica holds on GPU runs (default 1); a fraction shares a GPU: 0.25 puts four"
            " replicas on one GPU, each vLLM engine taking 0.9 x 0.25 of its memory, started one "
            "after another"
        ),
        low=0,
        high=MAX_GPUS,
        low_open=True,
        bound_error=f"must be a positive number of GPUs up to {MAX_GPUS}, fractions allowed",
    )
    replicas: int = option(1, "replicas per model; agent j of a model uses replica j mod N", low=1, high=1024)
    tensor_parallel: int = option(
        1, "GPUs per vLLM replica (placement group of that many GPU bundles)", low=1, high=MAX_GPUS
    )
    device: str = option(
        "auto",
        (
            "replicas' device: auto (GPUs when placement_resources or --tensor-parallel ask for them,"
            " or the cluster has GPUs now) | cpu | gpu (say so on an autoscaling cluster whose GPU "
            "nodes are not up yet)"
        ),
        choices=DEVICES,
    )
    embedding_device: str = option(
        "auto",
        ("the embedding actor's device: auto (a 0.1 GPU share when the run uses GPUs, else cpu) | cpu | cuda"),
        choices=EMBEDDING_DEVICES,
    )
    placement_timeout: float | None = option(
        None,
        (
            "seconds to wait for the nodes (or the autoscaler) to offer every replica's "
            "GPUs/resources, all reserved at once, then a one-line error (default 600; 1800 on a "
            "cluster with an autoscaler)"
        ),
        low=0,
        high=7 * 86400,
        low_open=True,
    )
    ray_address: str | None = option(
        None,
        (
            "Ray cluster to join (default $RAY_ADDRESS, else as ray.init() without an address: a Ray "
            "already started on this machine, or a new local one)"
        ),
    )
