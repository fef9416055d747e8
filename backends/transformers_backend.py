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

Each row has its own temperature, top-p, max_tokens and ``torch.Generator`` seeded from its
request, so a request's sample does not depend on which other requests share its batch (up to
floating-point differences of batched matmuls).

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
    gen: Any
    enqueued: float
    tokens: list[int] = field(default_factory=list)


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
        self.max_batch = max_batch or 16
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
        gen = self.torch.Generator(device="cpu")
        gen.manual_seed(int(req.seed) & 0x7FFFFFFFFFFFFFFF)
        row = _Row(rid, req, len(ids), gen, now)
        row.prompt_ids = ids  # type: ignore[attr-defined]
        row.dropped = dropped  # type: ignore[attr-defined]
        self._waiting.append(row)

    def has_work(self) -> bool:
        return bool(self._waiting or self._rows or self._done)

    @property
    def running(self) -> int:
        return len(self._rows)

    # ------------------------------------------------------------------ sampling
    def _sample(self, logits, row: _Row) -> int:
        torch = self.torch
        req = row.req
        if req.temperature <= 0:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits / req.temperature, dim=-1)
        if req.top_p < 1.0:
            sorted_p, idx = torch.sort(probs, descending=True)
            keep = torch.cumsum(sorted_p, dim=-1) - sorted_p < req.top_p
            keep[0] = True
            sorted_p = torch.where(keep, sorted_p, torch.zeros_like(sorted_p))
            choice = torch.multinomial(sorted_p / sorted_p.sum(), 1, generator=row.gen)
            return int(idx[choice])
        return int(torch.multinomial(probs, 1, generator=row.gen))

    # ------------------------------------------------------------------ cache surgery
    @staticmethod
    def _layers(cache):
        return cache.layers

    def _merge(self, cache_new, mask_new, pos_new, logits_new) -> None:
        """Append prefilled rows to the running batch, left-padding the shorter KV sequence."""
        torch = self.torch
        if self._cache is None:
            self._cache, self._mask, self._pos, self._logits = cache_new, mask_new, pos_new, logits_new
            return
        t_old, t_new = self._mask.shape[1], mask_new.shape[1]
        width = max(t_old, t_new)

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
        self._pos = torch.cat([self._pos, pos_new])
        self._logits = torch.cat([self._logits, logits_new])

    def _select(self, keep: list[int]) -> None:
        """Keep only these batch rows; drop KV columns that are padding for every row left."""
        torch = self.torch
        if not keep:
            self._cache = self._mask = self._pos = self._logits = None
            return
        sel = torch.tensor(keep, dtype=torch.long, device=self.device)
        self._cache.batch_select_indices(sel)
        self._mask, self._pos, self._logits = self._mask[sel], self._pos[sel], self._logits[sel]
        used = self._mask.any(dim=0).nonzero()
        lead = int(used[0]) if len(used) else 0
        if lead > 0:
            for layer in self._layers(self._cache):
                layer.keys = layer.keys[:, :, lead:, :]
                layer.values = layer.values[:, :, lead:, :]
            self._mask = self._mask[:, lead:]

    # ------------------------------------------------------------------ stepping
    def _admit(self) -> None:
        torch = self.torch
        room = self.max_batch - len(self._rows)
        if room <= 0 or not self._waiting:
            return
        batch, self._waiting = self._waiting[:room], self._waiting[room:]
        width = max(r.prompt_len for r in batch)
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for k, r in enumerate(batch):
            ids[k, width - r.prompt_len :] = torch.tensor(r.prompt_ids, dtype=torch.long)  # type: ignore[attr-defined]
            mask[k, width - r.prompt_len :] = 1
            del r.prompt_ids  # type: ignore[attr-defined]
        ids, mask = ids.to(self.device), mask.to(self.device)
        position = (mask.cumsum(-1) - 1).clamp(min=0)
        # Only the last position's logits are needed: computing the LM head over the whole prompt
        # (vocab 49k x prompt length) was a quarter of prefill time on CPU.
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=position, use_cache=True, logits_to_keep=1)
        self._merge(out.past_key_values, mask, position[:, -1], out.logits[:, -1, :].float())
        self._rows.extend(batch)

    def step(self) -> list[tuple[Any, GenResult]]:
        """Admit waiting rows, sample one token for every running row, run one decode step.

        Returns the requests that finished (with their results) during this step.
        """
        torch = self.torch
        finished, self._done = self._done, []
        with torch.inference_mode():
            self._admit()
            if not self._rows:
                return finished
            self.steps += 1
            logits = self._logits.cpu()
            keep, new_tokens = [], []
            now = time.perf_counter()
            for k, row in enumerate(self._rows):
                tok = self._sample(logits[k], row)
                row.tokens.append(tok)
                reason = None
                if tok in self.eos_ids:
                    reason = "stop"
                elif len(row.tokens) >= row.req.max_tokens or row.prompt_len + len(row.tokens) >= self.max_context:
                    reason = "length"
                if reason:
                    # one sequence of ids decodes to one str (the stub's return type covers batches too)
                    text = self.tokenizer.decode(row.tokens, skip_special_tokens=True).strip()  # type: ignore[union-attr]
                    finished.append(
                        (
                            row.rid,
                            GenResult(
                                text,
                                row.prompt_len,
                                len(row.tokens),
                                now - row.enqueued,
                                reason,
                                truncated_messages=getattr(row, "dropped", 0),
                            ),
                        )
                    )
                else:
                    keep.append(k)
                    new_tokens.append(tok)
            if len(keep) < len(self._rows):
                self._rows = [self._rows[k] for k in keep]
                self._select(keep)
            if self._rows:
                ones = torch.ones((len(self._rows), 1), dtype=self._mask.dtype, device=self.device)
                self._mask = torch.cat([self._mask, ones], dim=1)
                self._pos = self._pos + 1
                inp = torch.tensor(new_tokens, dtype=torch.long, device=self.device).unsqueeze(1)
                out = self.model(
                    input_ids=inp,
                    attention_mask=self._mask,
                    position_ids=self._pos.unsqueeze(1),
                    past_key_values=self._cache,
                    use_cache=True,
                )
                self._cache = out.past_key_values
                self._logits = out.logits[:, -1, :].float()
        return finished

    def abort_all(self, error: str) -> list[tuple[Any, GenResult]]:
        """Fail every queued and running request (after a backend exception); reset the batch."""
        failed = [
            (r.rid, GenResult("", r.prompt_len, len(r.tokens), 0.0, "error", error)) for r in self._rows + self._waiting
        ]
        failed += self._done
        self._rows, self._waiting, self._done = [], [], []
        self._cache = self._mask = self._pos = self._logits = None
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
