"""What runs before Ray starts: every input of a run checked, so bad input fails in a second.

:func:`prepare` loads the questions and checks the configuration, the questions' text, the memory
the run will need, the protocol, the prompts, the backend's model files or endpoint, the embedding
model and the output folder, each failure one line naming the flag; :func:`check_loaded_images` is
the one check left for after the replicas loaded.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from backends.base import ImagesNotSupported
from backends.embedding import check_embedding_model
from engine.config import ConfigError, RunConfig
from engine.dataset_routing import check_text, experiment_questions
from engine.inputs import check_out_dir
from engine.metrics import check_ray_metrics
from engine.plan import check_in_flight
from engine.prompts import PromptSet
from engine.protocols import protocol_spec, validate_protocol
from engine.protocols.shared import EMBEDDING_MODEL
from engine.results.sinks import sink_class
from engine.tasks import DatasetError, Question

log = logging.getLogger(__name__)

RUNS_DIR = Path("runs")  # where a run without --out writes (RUNS_DIR/<timestamp>)


def needs_embeddings(cfg: RunConfig) -> bool:
    """Protocols that ask for a similarity matrix (S2-MAD's embedding check, CortexDebate's intimacy)."""
    return protocol_spec(cfg.experiment.protocol).needs_embeddings(cfg)


def check_images(cfg: RunConfig, questions: list[Question]) -> None:
    """Before any actor starts: a data set whose questions carry images needs a backend that can
    send them (:attr:`backends.base.Backend.accepts_images`); else one line naming the data set,
    the backend and what to use instead."""
    n = sum(q.image is not None for q in questions)
    if not n:
        return
    if not cfg.backend_spec.accepts_images:
        raise ImagesNotSupported(
            f"--dataset {cfg.experiment.dataset}: {n} of the {len(questions)} questions carry an image and "
            f"--backend {cfg.sampling.backend} sends text only; use --backend openai (a server with a vision model) "
            f"or --backend vllm with a multimodal model"
        )
    log.info(
        "%d of %d questions carry an image (--backend %s sends it with each request about them)",
        n,
        len(questions),
        cfg.sampling.backend,
    )


def check_loaded_images(cfg: RunConfig, questions: list[Question], infos: list[dict[str, Any]]) -> None:
    """After the replicas loaded, before the first call: every model that will see a question with an
    image must take images (vLLM: a multimodal model; the replica's ``info()`` says)."""
    if not any(q.image is not None for q in questions):
        return
    for info in infos:
        if not info.get("accepts_images", False):
            raise ImagesNotSupported(
                f"--dataset {cfg.experiment.dataset}: its questions carry images and --model {info.get('model')} "
                f"takes no images (--backend {cfg.sampling.backend} loaded it as a text-only model); use a "
                f"multimodal (vision) model or --backend openai with a server that serves one"
            )


def prepare(cfg: RunConfig, questions: list[Question] | None = None) -> tuple[list[Question], PromptSet]:
    """Check every input of a run before any actor starts; return its questions and prompts.

    ``questions``: already loaded (else from ``--dataset``). Raises a one-line error naming the
    flag for a bad configuration, a metric registered in this process only
    (:func:`engine.metrics.check_ray_metrics`), an unknown ``--sink``, data set, text that cannot be written as UTF-8, a
    run too large for this machine's memory (:mod:`engine.footprint`), protocol setting, model, endpoint,
    embedding model, or an ``--out`` that is a file or cannot be written in (checked last, as it
    creates the folder; without ``--out``, :data:`RUNS_DIR`).
    """
    cfg.validate()
    check_ray_metrics()  # a metric registered here only would be missing from the coordinator's rows
    sink_class(cfg.output.sink)  # --sink names a registered sink (one line naming the known ones)
    if questions is None:
        questions = experiment_questions(cfg.experiment)
    else:
        questions = check_text(questions)
    if not questions:
        raise DatasetError(f"--dataset {cfg.experiment.dataset}: no questions selected")
    check_images(cfg, questions)
    tasks = {q.task for q in questions}
    if len(tasks) != 1:
        raise DatasetError(f"--dataset {cfg.experiment.dataset}: questions of several tasks {sorted(tasks)} in one run")
    # Imports the protocol's module (registering its prompt stages) and runs its own checks,
    # e.g. TopologyError naming --density/--agents or --groups, before anything starts.
    validate_protocol(cfg)
    check_in_flight(cfg, questions)
    prompts = PromptSet.for_task(tasks.pop(), cfg.experiment.prompts)
    preflight = cfg.backend_spec.preflight  # model files, an endpoint
    if preflight is not None:
        preflight(cfg)
    if needs_embeddings(cfg):
        check_embedding_model(cfg.option(EMBEDDING_MODEL))  # names --embedding-model if it cannot load
    check_out_dir(cfg.output.out or RUNS_DIR, "--out", ConfigError)
    return questions, prompts
