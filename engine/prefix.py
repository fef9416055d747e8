"""Prefill left to compute after a perfect prefix cache, counted exactly from token ids.

Definition (the cost model's ``computed_prompt_tokens``, :mod:`engine.cost_model`): for each
prompt of a run, in the order sent, its prompt tokens minus the longest token prefix it shares
with what the cache holds from the *earlier* calls of the same model in the run: each earlier
call's prompt followed by its reply (a serving engine keeps the keys and values of the tokens
it generated too, so an agent whose next prompt repeats its own reply after its previous prompt
finds that reply cached). The cache is run-wide and never evicts; tokens are whole, with no
rounding to cache blocks.

:func:`computed_prefill` computes it for a list of token-id sequences without building a trie:
among sequences kept in lexicographic order, the one sharing the longest prefix with a prompt is
next to the prompt's place in that order (a common prefix can only shrink with the distance), so
each prompt costs a binary search, two comparisons and an insertion. Memory is four bytes per
token.

:func:`engine.prefix_runs.run_prefill` re-tokenizes a run folder's stored prompts and replies
(the prompts table, ``calls.prompt`` and ``calls.text``) with a given tokenizer and applies it:
the number vLLM's measured ``calls.cached_prompt_tokens`` is compared with.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable, Sequence

import numpy as np

_MAX_ID = 2**32  # token ids are stored as 4-byte unsigned integers


def computed_prefill(
    prompts: Sequence[Sequence[int]],
    models: Sequence[Hashable] | None = None,
    held: Sequence[Sequence[int] | None] | None = None,
) -> list[int]:
    """Per prompt, in the order given (the order sent), its tokens that a perfect prefix cache
    does not serve: its length minus the longest prefix it shares with what an earlier call of
    the same model (``models[i]``; default: one model) left in the cache. ``held[i]``: what call
    i leaves there, its prompt followed by its reply's tokens (default, or ``None``: its prompt
    alone). Token ids are integers in [0, 2^32); a ValueError names the first sequence with
    another."""
    n = len(prompts)
    for name, other in (("models", models), ("held sequences", held)):
        if other is not None and len(other) != n:
            raise ValueError(f"{n} prompts but {len(other)} {name}")
    arrays = [_as_ids(p, f"prompt {i}") for i, p in enumerate(prompts)]
    kept = list(arrays)
    for i, h in enumerate(held or ()):
        if h is not None:
            kept[i] = _as_ids(h, f"held {i}")
    caches: dict[Hashable, _Cache] = {}
    out = []
    for i, model in enumerate(models if models is not None else [None] * n):
        cache = caches.setdefault(model, _Cache())
        out.append(len(arrays[i]) - cache.longest_prefix(arrays[i]))
        cache.add(kept[i])
    return out


class _Cache:
    """Token sequences in lexicographic order (their big-endian bytes sort as the sequences do)."""

    def __init__(self) -> None:
        self.keys: list[bytes] = []
        self.arrays: list[np.ndarray] = []

    def longest_prefix(self, ids: np.ndarray) -> int:
        """The longest prefix ``ids`` shares with a kept sequence: one of its two neighbours."""
        at = bisect_left(self.keys, ids.tobytes())
        return max((_common_prefix(ids, self.arrays[j]) for j in (at - 1, at) if 0 <= j < len(self.arrays)), default=0)

    def add(self, ids: np.ndarray) -> None:
        key = ids.tobytes()
        at = bisect_left(self.keys, key)
        self.keys.insert(at, key)
        self.arrays.insert(at, ids)


def _as_ids(seq: Sequence[int], name: str) -> np.ndarray:
    """``seq`` as big-endian uint32 (so that comparing the bytes compares the sequences)."""
    ids = np.asarray(seq, dtype=np.int64) if len(seq) else np.zeros(0, dtype=np.int64)
    if ids.ndim != 1 or (ids.size and (ids.min() < 0 or ids.max() >= _MAX_ID)):
        raise ValueError(f"{name}: token ids must be one sequence of integers in [0, 2^32)")
    return ids.astype(">u4")


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    m = min(len(a), len(b))
    differ = np.flatnonzero(a[:m] != b[:m])
    return int(differ[0]) if differ.size else m


__all__ = ["computed_prefill"]
