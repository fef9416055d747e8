"""Next-token sampling for a whole batch in a few tensor operations on the model's device.

:func:`sample_tokens` draws one token per row: greedy rows (temperature <= 0) take the argmax;
the others sample from ``softmax(logits / temperature)`` restricted to their top-p nucleus, by
the Gumbel-max trick: ``argmax(logits / T + G)`` over the kept tokens, where ``G = -log(-log U)``
and ``U`` is uniform in (0, 1). The uniforms come from an integer hash of (the row's key, the
token's position, the vocabulary index) computed on the device, not from a random generator, so a
row's draw is a pure function of its own logits and request: the same whatever other rows share
the batch and whenever the row joined it (a per-row ``torch.Generator`` cannot serve a batched
draw). :func:`row_keys` turns request seeds into those keys.

The hash works on 32-bit values held in int64 tensors: every product is a value below 2**32 times
a multiplier below 2**31, so it stays inside int64, and is masked back to 32 bits.
"""

from __future__ import annotations

import torch

MASK32 = 0xFFFFFFFF
_ROUNDS = (0x7FEB352D, 0x2C1B3C6D)  # odd multipliers below 2**31
_STRIDE = 0x61C88647  # odd, below 2**31: spreads consecutive vocabulary indices over 32 bits
_UNIT = 2.0**-23


def mix32(x: torch.Tensor) -> torch.Tensor:
    """Hash int64 values in [0, 2**32) to [0, 2**32): xor-shift and multiply rounds.

    Returns a new tensor (``x`` is left as it is); the rounds work in place on it.
    """
    x = x ^ (x >> 16)
    for mult in _ROUNDS:
        x.mul_(mult).bitwise_and_(MASK32)
        x ^= x >> 15
    return x


def row_keys(seeds: torch.Tensor) -> torch.Tensor:
    """A 32-bit key per row from its request seed (int64, non-negative): both halves count."""
    low, high = seeds & MASK32, (seeds >> 32) & MASK32
    return mix32(low ^ mix32(high ^ 0x5BD1E995))


def uniforms(keys: torch.Tensor, positions: torch.Tensor, vocab: int) -> torch.Tensor:
    """U in (0, 1) for every row and vocabulary index, float32 [rows, vocab].

    A pure function of (key, position, index): 23 hashed bits, centred in their interval, so
    neither 0 nor 1 occurs.
    """
    row = mix32(keys ^ mix32(positions & MASK32))
    idx = torch.arange(vocab, device=keys.device, dtype=torch.int64) * _STRIDE
    bits = mix32((row[:, None] + idx[None, :]) & MASK32) >> 9
    return (bits.to(torch.float32) + 0.5) * _UNIT


def nucleus(scaled: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Which tokens each row keeps under top-p: bool [rows, vocab].

    The most probable tokens whose probability mass before them is below ``top_p`` (so the
    token that crosses it stays, and the top token always does); a row with ``top_p >= 1``
    keeps every token. Tokens tied with the least probable kept one are kept too.
    """
    ordered = scaled.sort(dim=-1, descending=True).values
    probs = ordered.softmax(dim=-1)
    before = probs.cumsum(dim=-1) - probs
    kept = (before < top_p[:, None]).sum(dim=-1).clamp(min=1)
    cutoff = ordered.gather(1, (kept - 1)[:, None])
    return (scaled >= cutoff) | (top_p[:, None] >= 1)


def sample_tokens(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_p: torch.Tensor | None,
    keys: torch.Tensor,
    positions: torch.Tensor,
) -> torch.Tensor:
    """One token id per row (int64 [rows]), on the logits' device.

    ``logits`` float [rows, vocab]; ``temperature`` and ``top_p`` float [rows] (``top_p`` None:
    no row restricts its nucleus, which skips the sort); ``keys`` from :func:`row_keys`;
    ``positions`` int64 [rows], the position of the token being drawn (its row's own count, so
    the draw does not depend on when the row joined the batch).
    """
    greedy = temperature <= 0
    scaled = logits / torch.where(greedy, 1.0, temperature)[:, None]
    gumbel = -torch.log(-torch.log(uniforms(keys, positions, logits.shape[-1])))
    noisy = scaled + gumbel
    if top_p is not None:
        noisy = noisy.masked_fill(~nucleus(scaled, top_p), float("-inf"))
    return torch.where(greedy, logits.argmax(dim=-1), noisy.argmax(dim=-1))
