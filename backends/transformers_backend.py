"""The CPU backend: a Hugging Face transformers causal LM with continuous batching.

The engine keeps one running batch with a shared KV cache and decodes it one token per step.
Between steps, waiting requests join the batch (their prompts are prefilled together, left-padded,
and their KV cache is merged into the running one), and finished rows (end-of-turn token or
``max_tokens``) leave it and their cache rows are dropped. So a debate round that finishes early
does not wait for a long batch to drain before its next round starts, and short replies do not
pay for long ones. Prompts are rendered with the model's own chat template and tokenizer, which
is also what counts the tokens.

``dtype`` ``auto`` is bfloat16 on CUDA and on CPUs with AMX/AVX512-BF16 (several times faster
than float32 there), else float32; batched bf16 rounds differently with batch composition, so
``float32`` is the choice for texts that repeat exactly run after run.

Each row has its own temperature, top-p and max_tokens. One step samples every row at once on the
model's device (:mod:`backends.sampling`: greedy rows take the argmax, the others draw with noise
hashed from their request's seed and the token's position), and only the batch's token ids come
back to the host. So a request's sample does not depend on which other requests share its batch
or when it joined (up to floating-point differences of batched matmuls).

``max_batch`` defaults to 16 rows on the CPU and to 64 on a GPU, where a decode step of dozens of
rows costs little more than one of a few (so the requests of a whole debate round run together).

Plain class, no Ray: the replica actor owns one and calls ``add``/``step`` from its loop;
``generate(list)`` runs a list to completion (for tests and benchmarks).

Text only (``accepts_images`` False): the driver refuses a data set with images before any actor
starts. Should an image request reach it anyway, its prompt is counted and sent by its text parts
(:func:`backends.model_store.chat_token_ids`), never a crash.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backends import model_store
from backends.base import Backend
from engine.records import GenRequest, GenResult


@dataclass
class _Row:
    rid: Any
    req: GenRequest
    prompt_len: int
    enqueued: float
    prompt_ids: list[int] = field(default_factory=list)  # emptied once the row is prefilled
    dropped: int = 0  # messages --context-overflow truncate dropped
    tokens: list[int] = field(default_factory=list)


# Per-row tensors of the running batch, merged and selected together with the KV cache.
_ROW_STATE = ("_pos", "_logits", "_temp", "_top_p", "_key")


class TransformersBackend(Backend):
    mode = "continuous"
    simulated = False
    loads_model_files = True  # resolve_model: fetched by prepare() before the engine starts
    accepts_images = False  # a causal LM with a text chat template

    def __init__(
        self,
        model: str,
        threads: int | None = None,
        device: str | None = None,
        max_batch: int | None = None,
        dtype: str | None = "auto",
        max_model_len: int | None = None,
    ):
        # function-level: importing torch here keeps it off start-up
        import torch

        # function-level: importing transformers here keeps it off start-up
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads:
            torch.set_num_threads(int(threads))
        self.torch = torch
        self.model_name = model
        self.path: Path = model_store.resolve_model(model)  # a hub id: downloaded first, see model_store.hub_snapshot
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.dtype = model_store.pick_dtype(dtype, self.device)
        if self.dtype == "bfloat16" and self.device.startswith("cuda") and not torch.cuda.is_bf16_supported():
            self.dtype = "float16"  # GPUs before Ampere
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.path))
        self.model = AutoModelForCausalLM.from_pretrained(str(self.path), dtype=getattr(torch, self.dtype)).to(
            self.device  # type: ignore[arg-type]  # transformers 5 types to() as if unbound; a device string is right
        )
        self.model.eval()
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos])
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else min(self.eos_ids)
        own = int(getattr(self.model.config, "max_position_embeddings", 0) or 0)
        self.max_context = int(max_model_len or own or 2048)  # the model's own context unless the user caps it
        self.max_batch = max_batch or default_max_batch(self.device)
        self.settings = {
            "device": self.device,
            "dtype": self.dtype,
            "max_model_len": self.max_context,
            "max_num_seqs": self.max_batch,
            "threads": torch.get_num_threads(),
            "revision": model_store.model_revision(model, self.path),
        }
        # running batch state
        self._waiting: list[_Row] = []
        self._rows: list[_Row] = []
        # torch is imported lazily (self.torch), so the batch state is typed Any; None while empty
        self._cache: Any = None
        self._mask: Any = None  # [B, T] attention mask of the running batch
        self._pos: Any = None  # [B] position id of each row's last token
        self._logits: Any = None  # [B, V] next-token logits of each row
        self._temp: Any = None  # [B] temperature of each row
        self._top_p: Any = None  # [B] top-p of each row
        self._key: Any = None  # [B] sampling key of each row (from its request's seed)
        self._done: list[tuple[Any, GenResult]] = []
        self.steps = 0

    # ------------------------------------------------------------------ tokens
    def encode(self, messages: list[dict[str, str]]) -> list[int]:
        return model_store.chat_token_ids(self.tokenizer, messages)

    def count_prompt_tokens(self, messages: list[dict[str, str]]) -> int:
        return len(self.encode(messages))

    # ------------------------------------------------------------------ queue
    def add(self, rid: Any, req: GenRequest) -> None:
        """Queue a request; it joins the running batch at the next step."""
        now = time.perf_counter()
        ids, dropped, error = model_store.fit_prompt(self.encode, req, self.max_context)
        if error:
            self._done.append((rid, GenResult("", len(ids), 0, 0.0, "error", error)))
            return
        self._waiting.append(_Row(rid, req, len(ids), now, prompt_ids=ids, dropped=dropped))

    def has_work(self) -> bool:
        return bool(self._waiting or self._rows or self._done)

    @property
    def running(self) -> int:
        return len(self._rows)

    # ------------------------------------------------------------------ sampling
    def _row_knobs(self, rows: list[_Row]) -> tuple[Any, Any, Any]:
        """Temperature, top-p and sampling key of these rows, as tensors on the device."""
        torch = self.torch
        temp = torch.tensor([r.req.temperature for r in rows], dtype=torch.float32, device=self.device)
        top_p = torch.tensor([r.req.top_p for r in rows], dtype=torch.float32, device=self.device)
        seeds = torch.tensor([int(r.req.seed) & 0x7FFFFFFFFFFFFFFF for r in rows], dtype=torch.long, device=self.device)
        # function-level: backends.sampling imports torch, which stays off start-up
        from backends.sampling import row_keys

        return temp, top_p, row_keys(seeds)

    def _sample(self) -> Any:
        """The next token of every running row, a tensor [B] on the device."""
        reqs = [r.req for r in self._rows]
        if all(q.temperature <= 0 for q in reqs):
            return self._logits.argmax(dim=-1)
        nucleus = any(q.temperature > 0 and q.top_p < 1.0 for q in reqs)
        # function-level: backends.sampling imports torch, which stays off start-up
        from backends.sampling import sample_tokens

        # the token drawn goes at position _pos + 1: a row's own count, whenever it joined
        return sample_tokens(self._logits, self._temp, self._top_p if nucleus else None, self._key, self._pos + 1)

    # ------------------------------------------------------------------ cache surgery
    @staticmethod
    def _layers(cache):
        return cache.layers

    def _merge(self, cache_new, mask_new, state_new: dict[str, Any]) -> None:
        """Append prefilled rows to the running batch, left-padding the shorter KV sequence."""
        torch = self.torch
        if self._cache is None:
            self._cache, self._mask = cache_new, mask_new
            for name in _ROW_STATE:
                setattr(self, name, state_new[name])
            return
        width = max(self._mask.shape[1], mask_new.shape[1])

        def pad_left(x, to, dim):
            if x.shape[dim] == to:
                return x
            shape = list(x.shape)
            shape[dim] = to - x.shape[dim]
            return torch.cat([torch.zeros(shape, dtype=x.dtype, device=x.device), x], dim=dim)

        for old, new in zip(self._layers(self._cache), self._layers(cache_new)):
            old.keys = torch.cat([pad_left(old.keys, width, 2), pad_left(new.keys, width, 2)], dim=0)
            old.values = torch.cat([pad_left(old.values, width, 2), pad_left(new.values, width, 2)], dim=0)
        self._mask = torch.cat([pad_left(self._mask, width, 1), pad_left(mask_new, width, 1)], dim=0)
        for name in _ROW_STATE:
            setattr(self, name, torch.cat([getattr(self, name), state_new[name]]))

    def _select(self, keep: list[int]) -> Any:
        """Keep only these batch rows; drop KV columns that are padding for every row left.

        Returns the kept rows' indices as a tensor on the device (None when no row is left).
        """
        torch = self.torch
        if not keep:
            self._cache = self._mask = None
            for name in _ROW_STATE:
                setattr(self, name, None)
            return None
        sel = torch.tensor(keep, dtype=torch.long, device=self.device)
        self._cache.batch_select_indices(sel)
        self._mask = self._mask[sel]
        for name in _ROW_STATE:
            setattr(self, name, getattr(self, name)[sel])
        used = self._mask.any(dim=0).nonzero()
        lead = int(used[0]) if len(used) else 0
        if lead > 0:
            for layer in self._layers(self._cache):
                layer.keys = layer.keys[:, :, lead:, :]
                layer.values = layer.values[:, :, lead:, :]
            self._mask = self._mask[:, lead:]
        return sel

    # ------------------------------------------------------------------ stepping
    def _admit(self) -> None:
        """Prefill waiting rows (as many as there is room for) and merge them into the batch."""
        torch = self.torch
        room = self.max_batch - len(self._rows)
        if room <= 0 or not self._waiting:
            return
        batch, self._waiting = self._waiting[:room], self._waiting[room:]
        width = max(r.prompt_len for r in batch)
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for k, r in enumerate(batch):
            ids[k, width - r.prompt_len :] = torch.tensor(r.prompt_ids, dtype=torch.long)
            mask[k, width - r.prompt_len :] = 1
            r.prompt_ids = []
        ids, mask = ids.to(self.device), mask.to(self.device)
        position = (mask.cumsum(-1) - 1).clamp(min=0)
        # Only the last position's logits are needed: computing the LM head over the whole prompt
        # (vocab 49k x prompt length) was a quarter of prefill time on CPU.
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=position, use_cache=True, logits_to_keep=1)
        temp, top_p, key = self._row_knobs(batch)
        state = {"_pos": position[:, -1], "_logits": out.logits[:, -1, :].float()}
        state.update(_temp=temp, _top_p=top_p, _key=key)
        self._merge(out.past_key_values, mask, state)
        self._rows.extend(batch)

    def _finish_reason(self, row: _Row, tok: int) -> str | None:
        if tok in self.eos_ids:
            return "stop"
        if len(row.tokens) >= row.req.max_tokens or row.prompt_len + len(row.tokens) >= self.max_context:
            return "length"
        return None

    def _record(self, ids: list[int], finished: list[tuple[Any, GenResult]]) -> list[int]:
        """Append each row's new token; finished rows go to ``finished``. Returns the rows that go on."""
        keep = []
        now = time.perf_counter()
        for k, (row, tok) in enumerate(zip(self._rows, ids)):
            row.tokens.append(tok)
            reason = self._finish_reason(row, tok)
            if reason is None:
                keep.append(k)
                continue
            # one sequence of ids decodes to one str (the stub's return type covers batches too)
            text = self.tokenizer.decode(row.tokens, skip_special_tokens=True).strip()  # type: ignore[union-attr]
            res = GenResult(
                text, row.prompt_len, len(row.tokens), now - row.enqueued, reason, truncated_messages=row.dropped
            )
            finished.append((row.rid, res))
        return keep

    def _decode(self, tokens) -> None:
        """One forward step of the running batch on its new tokens (a tensor [B] on the device)."""
        self._mask = self.torch.nn.functional.pad(self._mask, (0, 1), value=1)
        self._pos = self._pos + 1
        out = self.model(
            input_ids=tokens.unsqueeze(1),
            attention_mask=self._mask,
            position_ids=self._pos.unsqueeze(1),
            past_key_values=self._cache,
            use_cache=True,
        )
        self._cache = out.past_key_values
        self._logits = out.logits[:, -1, :].float()

    def step(self) -> list[tuple[Any, GenResult]]:
        """Admit waiting rows, sample one token for every running row, run one decode step.

        Returns the requests that finished (with their results) during this step. The sampled
        ids are the only data that cross to the host.
        """
        finished, self._done = self._done, []
        with self.torch.inference_mode():
            self._admit()
            if not self._rows:
                return finished
            self.steps += 1
            tokens = self._sample()
            keep = self._record(tokens.tolist(), finished)
            if len(keep) < len(self._rows):
                self._rows = [self._rows[k] for k in keep]
                sel = self._select(keep)
                tokens = tokens[sel] if sel is not None else None
            if self._rows:
                self._decode(tokens)
        return finished

    def abort_all(self, error: str) -> list[tuple[Any, GenResult]]:
        """Fail every queued and running request (after a backend exception); reset the batch."""
        failed = [
            (r.rid, GenResult("", r.prompt_len, len(r.tokens), 0.0, "error", error)) for r in self._rows + self._waiting
        ]
        failed += self._done
        self._rows, self._waiting, self._done = [], [], []
        self._select([])
        return failed

    # ------------------------------------------------------------------ one-shot
    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """Run these requests to completion (continuous batching within the list)."""
        results: dict[int, GenResult] = {}
        for i, req in enumerate(requests):
            self.add(i, req)
        while len(results) < len(requests):
            for rid, res in self.step():
                results[rid] = res
        return [results[i] for i in range(len(requests))]


def default_max_batch(device: str) -> int:
    """Rows per batch when ``--max-batch`` is not given: 64 on a GPU, 16 on the CPU."""
    return 64 if device.startswith("cuda") else 16
