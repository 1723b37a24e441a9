"""The cost model of a decoder-only Transformer, on paper: what the lecture's formulas predict.

    parameters per block   4·d² (W_q, W_k, W_v, W_o)  +  2·d·d_ff (W_1, W_2)     (+ small terms)
    forward FLOPs          matmuls 2·(4d² + 2·d·d_ff) per token per block: O(b·n·d²) in total,
                           plus attention 2·2·n·d per token per block (q kᵀ and probs v): O(b·n²·d)
    training               ≈ 3 × forward (the backward does two matmuls for each forward one)
    KV cache               2 · L · b · n · d numbers (a k and a v per layer, token and feature)
    decoding one token     with the cache O(L·(d² + n·d)): linear in the context n, instead of
                           re-running all n tokens
A multiply-add counts as 2 FLOPs. ``lm_cost(...)["parameters"]`` is exact: it equals
``DecoderLM(...).num_parameters()`` (the tests check it).
"""
from __future__ import annotations


def block_parameters(d_model: int, d_ff: int) -> dict:
    """Parameters of one Transformer block: the lecture's formula and the exact count."""
    formula = 4 * d_model ** 2 + 2 * d_model * d_ff
    biases = 4 * d_model + d_ff + d_model          # W_qkv, W_o; W_1, W_2
    norms = 2 * 2 * d_model                        # two LayerNorms, γ and β
    return {"formula": formula, "exact": formula + biases + norms}


def lm_cost(vocab_size: int, d_model: int, n_layers: int, d_ff: int | None = None,
            context: int = 256, batch_size: int = 1, positional: str = "learned",
            tie_weights: bool = True, n_heads: int = 4, bytes_per_number: int = 4,
            relative_buckets: int = 32) -> dict:
    """Parameters, FLOPs and memory of ``DecoderLM`` with this configuration.

    -> dict with parameters (exact), parameters_formula (L·(4d² + 2·d·d_ff)), embedding
       parameters, forward FLOPs per token at full context, training FLOPs per step of
       batch_size × context tokens, KV-cache numbers and bytes at full context, and decoding
       FLOPs for the last token with and without the cache.
    """
    d, L, n, b = d_model, n_layers, context, batch_size
    d_ff = d_ff or 4 * d
    block = block_parameters(d, d_ff)
    embedding = vocab_size * d + (context * d if positional == "learned" else 0)
    extra = (relative_buckets * n_heads * L if positional == "relative" else 0) + 2 * d
    head = 0 if tie_weights else d * vocab_size
    matmul_flops = 2 * (4 * d * d + 2 * d * d_ff)                 # per token per block
    attention_flops = 2 * 2 * n * d                               # per token per block, n keys
    head_flops = 2 * d * vocab_size
    forward_per_token = L * (matmul_flops + attention_flops) + head_flops
    kv_numbers = 2 * L * b * n * d
    return {
        "parameters": L * block["exact"] + embedding + extra + head,
        "parameters_formula": L * block["formula"],
        "embedding_parameters": embedding + head,
        "forward_flops_per_token": forward_per_token,
        "training_flops_per_step": 3 * forward_per_token * b * n,
        "kv_cache_numbers": kv_numbers,
        "kv_cache_bytes": kv_numbers * bytes_per_number,
        "decode_flops_cached": b * forward_per_token,
        "decode_flops_uncached": b * n * forward_per_token,
    }


def lm_cost_of(config: dict, batch_size: int = 1, bytes_per_number: int = 4) -> dict:
    """``lm_cost`` of a DecoderLM given by its ``config`` (``model.config``, or a checkpoint's)."""
    return lm_cost(config["vocab_size"], config["d_model"], config["n_layers"], config["d_ff"],
                   context=config["max_len"], batch_size=batch_size,
                   positional=config["positional"], tie_weights=config["tie_weights"],
                   n_heads=config["n_heads"], bytes_per_number=bytes_per_number)


def format_cost(cost: dict) -> str:
    """The table ``minitf info`` prints."""
    def human(x):
        for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
            if abs(x) >= size:
                return f"{x / size:.2f}{unit}"
        return str(x)

    rows = [
        ("parameters (exact)", human(cost["parameters"]), f"{cost['parameters']:,}"),
        ("  blocks, L·(4d² + 2·d·d_ff)", human(cost["parameters_formula"]), ""),
        ("  embeddings and head", human(cost["embedding_parameters"]), ""),
        ("forward FLOPs per token", human(cost["forward_flops_per_token"]), "at full context"),
        ("training FLOPs per step", human(cost["training_flops_per_step"]), "≈ 3 × forward"),
        ("KV cache at full context", human(cost["kv_cache_bytes"]) + "B",
         f"2·L·b·n·d = {cost['kv_cache_numbers']:,} numbers"),
        ("next token, with KV cache", human(cost["decode_flops_cached"]) + " FLOPs", ""),
        ("next token, without it", human(cost["decode_flops_uncached"]) + " FLOPs",
         "re-runs the whole context"),
    ]
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{a:<{width}}  {b:>12}  {c}" for a, b, c in rows)
