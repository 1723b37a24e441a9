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

One block, operation by operation (``attention_table``): FLOPs, IO (numbers read + written) and
arithmetic intensity = FLOPs / IO, the FLOPs done per number moved. A matmul of n×m by m×k does
2·n·m·k FLOPs and moves n·m + m·k + n·k numbers; softmax does a few FLOPs per number it moves, so
it is bound by memory speed, not by arithmetic.
"""
from __future__ import annotations

import inspect

from minitf.models import MODELS, check_settings
from minitf.models.lm import POSITIONAL
from minitf.models.rnn import CELLS
from minitf.validate import (check_flags, check_heads, check_int, check_rope_width, check_sizes,
                             feed_forward_width, is_real_number)

SOFTMAX_FLOPS = 6      # per score: × 1/√d_head, max, −, exp, +, ÷

# What lm_cost_of reads from a DecoderLM's config: its sizes (whole numbers), then the others
LM_CONFIG = ("vocab_size d_model n_heads n_layers d_ff max_len", "positional tie_weights pre_ln")


def _check_keys(table, keys, name: str, where: str, wanted: str) -> None:
    """TypeError unless ``table`` is a dict, ValueError unless it has every one of ``keys``: a
    bare KeyError would name one key and neither the function nor what it wanted."""
    if not isinstance(table, dict):
        raise TypeError(f"{where}: {name} is a {type(table).__name__}; wanted a dict, {wanted}")
    missing = [key for key in keys if key not in table]
    if missing:
        raise ValueError(f"{where}: {name} lacks {', '.join(map(repr, missing))}; "
                         f"wanted {wanted}")


def _check_config(config, kind: str, keys: tuple, where: str) -> None:
    """A model's config (``model.config``, or a checkpoint's), checked before any key is read.
    ``keys``: the sizes the cost reads, each a whole number (or None where the model takes None:
    d_ff is then 4 · d_model), and the other keys it reads, checked where they are used. A key
    the model of family ``kind`` does not take is refused too: a typo would be ignored."""
    model = MODELS[kind]
    sizes, needed = keys[0].split(), keys[0].split() + keys[1].split()
    _check_keys(config, needed, "config", where, f"the settings of a {model.__name__} "
                                                 f"(model.config)")
    check_settings(model, config, where, complete=False)     # its own lacks said just above
    takes = inspect.signature(model).parameters
    for key in sizes:
        if config[key] is not None or takes[key].default is not None:
            check_int(config[key], f"config[{key!r}]", where, low=0 if key == "n_layers" else 1)


def block_parameters(d_model: int, d_ff: int) -> dict:
    """Parameters of one Transformer block: the lecture's formula and the exact count."""
    check_sizes("block_parameters", d_model=d_model, d_ff=d_ff)
    formula = 4 * d_model ** 2 + 2 * d_model * d_ff
    biases = 4 * d_model + d_ff + d_model          # W_qkv, W_o; W_1, W_2
    norms = 2 * 2 * d_model                        # two LayerNorms, γ and β
    return {"formula": formula, "exact": formula + biases + norms}


def lm_cost(vocab_size: int, d_model: int, n_layers: int, d_ff: int | None = None,
            context: int = 256, batch_size: int = 1, positional: str = "learned",
            tie_weights: bool = True, n_heads: int = 4, bytes_per_number: int = 4,
            relative_buckets: int = 32, pre_ln: bool = True) -> dict:
    """Parameters, FLOPs and memory of ``DecoderLM`` with this configuration.

    -> dict with parameters (exact), parameters_formula (L·(4d² + 2·d·d_ff)), embedding
       parameters, forward FLOPs per token at full context, training FLOPs per step of
       batch_size × context tokens, KV-cache numbers and bytes at full context, and decoding
       FLOPs for the last token with and without the cache.
    """
    check_sizes("lm_cost", vocab_size=vocab_size, d_model=d_model, n_layers=n_layers,
                batch_size=batch_size, n_heads=n_heads, bytes_per_number=bytes_per_number)
    # context 0 is no model, and still priced: its forward FLOPs are the part that no attention
    # does, what the tests subtract to see attention's part grow as n²
    check_int(context, "context", "lm_cost", low=0, what="the keys a token attends to")
    check_int(relative_buckets, "relative_buckets", "lm_cost")
    check_flags("lm_cost", tie_weights=tie_weights, pre_ln=pre_ln)  # 'no' would be truthy
    if positional not in POSITIONAL:
        raise ValueError(f"lm_cost: positional must be one of {POSITIONAL}; got {positional!r}")
    check_heads(d_model, n_heads, "lm_cost")
    check_rope_width(positional, d_model // n_heads, "lm_cost")       # as DecoderLM refuses it
    d, L, n, b = d_model, n_layers, context, batch_size
    d_ff = feed_forward_width(d_ff, d, "lm_cost")
    block = block_parameters(d, d_ff)
    embedding = vocab_size * d + (context * d if positional == "learned" else 0)
    final_norm = 2 * d if pre_ln else 0            # pre-LN's LayerNorm after the last block
    extra = (relative_buckets * n_heads * L if positional == "relative" else 0) + final_norm
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
    check_sizes("lm_cost_of", batch_size=batch_size, bytes_per_number=bytes_per_number)
    _check_config(config, "lm", LM_CONFIG, "lm_cost_of")
    return lm_cost(config["vocab_size"], config["d_model"], config["n_layers"], config["d_ff"],
                   context=config["max_len"], batch_size=batch_size,
                   positional=config["positional"], tie_weights=config["tie_weights"],
                   n_heads=config["n_heads"], bytes_per_number=bytes_per_number,
                   pre_ln=config["pre_ln"])


def decoder_window_numbers(vocab_size: int, d_model: int, n_layers: int, d_ff: int,
                           n_heads: int, context: int) -> int:
    """Numbers a DecoderLM's training step holds at least for each window, at the start of its
    backward, when every layer still holds what its own backward reads (causal attention keeps
    at least the lower triangle of its weights):
        per block      2·n·d (two layer norms' x̂) + 3·n·d (q, k, v) + n·d (the heads, merged)
                       + n·d_ff (the hidden layer) + h·n(n+1)/2 (the attention weights)
        the top        n·d (the last norm's x̂) + n·V (the softmax of the logits)
    """
    check_sizes("decoder_window_numbers", vocab_size=vocab_size, d_model=d_model,
                n_layers=n_layers, d_ff=d_ff, n_heads=n_heads, context=context)
    check_heads(d_model, n_heads, "decoder_window_numbers")
    d, n, h = d_model, context, n_heads
    per_block = 6 * n * d + n * d_ff + h * n * (n + 1) // 2
    return n_layers * per_block + n * d + n * vocab_size


def recurrent_window_numbers(vocab_size: int, d_model: int, d_hidden: int, cell: str,
                             context: int) -> int:
    """The same floor for the recurrent baseline (RNNLM): its layer keeps the embedded input and
    every step's state, h_t (an RNN) or h_t, c_t and the four gates (an LSTM), and the softmax
    of the logits: n·(d + k·d_h) + n·V numbers, k = 1 or 6."""
    where = "recurrent_window_numbers"
    if cell not in CELLS:            # "gru" or "LSTM" was counted as a plain RNN
        raise ValueError(f"{where}: cell must be one of {tuple(CELLS)}; got {cell!r}")
    check_sizes(where, vocab_size=vocab_size, d_model=d_model, d_hidden=d_hidden, context=context)
    states = 6 if cell == "lstm" else 1
    return context * (d_model + states * d_hidden + vocab_size)


def training_memory_floor(window_numbers: int, batch_size: int, parameters: int,
                          bytes_per_number: int = 4) -> int:
    """Bytes a training step holds at least: ``batch_size`` windows of ``window_numbers`` (one of
    the two functions above), and 4 numbers per parameter beside them: the weight, its gradient
    and AdamW's two moments. A floor, not an estimate: a step's traced peak is 1.7-3.8 × its
    windows' part at the sizes tests/test_memory_floor.py tries, 2.0 × for the model ``minitf
    train`` builds (the peak comes during the backward, beside the gradients), and up to 9 ×
    where a long context meets ALiBi or relative positions (their biased scores are whole n × n
    arrays, not the causal path's triangle): minitf.memory.step_peak_bytes measures one."""
    where = "training_memory_floor"
    check_int(window_numbers, "window_numbers", where, what="the numbers a window holds")
    check_int(batch_size, "batch_size", where, low=0, what="the windows (0: the weights alone)")
    check_int(parameters, "parameters", where, low=0, what="the model's parameters")
    check_int(bytes_per_number, "bytes_per_number", where)
    return (batch_size * window_numbers + 4 * parameters) * bytes_per_number


def available_memory() -> int | None:
    """Bytes this machine can still give a process without swapping (Linux's MemAvailable),
    or None where the system does not say."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024          # it counts in KiB
    except (OSError, ValueError, IndexError):
        pass
    return None


def format_cost(cost: dict) -> str:
    """The table ``minitf info`` prints."""
    keys = ("parameters", "parameters_formula", "embedding_parameters", "forward_flops_per_token",
            "training_flops_per_step", "kv_cache_bytes", "kv_cache_numbers",
            "decode_flops_cached", "decode_flops_uncached")
    _check_keys(cost, keys, "cost", "format_cost", "what lm_cost returns")
    for key in keys:
        if not is_real_number(cost[key]):      # None failed as "bad operand type for abs()"
            raise TypeError(f"format_cost: cost[{key!r}] is {cost[key]!r:.40}; wanted a number, "
                            f"as lm_cost returns")
    rows = [
        ("parameters (exact)", _human(cost["parameters"]), f"{cost['parameters']:,}"),
        ("  blocks, L·(4d² + 2·d·d_ff)", _human(cost["parameters_formula"]), ""),
        ("  embeddings and head", _human(cost["embedding_parameters"]), ""),
        ("forward FLOPs per token", _human(cost["forward_flops_per_token"]), "at full context"),
        ("training FLOPs per step", _human(cost["training_flops_per_step"]), "≈ 3 × forward"),
        ("KV cache at full context", _human(cost["kv_cache_bytes"]) + "B",
         f"2·L·b·n·d = {cost['kv_cache_numbers']:,} numbers"),
        ("next token, with KV cache", _human(cost["decode_flops_cached"]) + " FLOPs", ""),
        ("next token, without it", _human(cost["decode_flops_uncached"]) + " FLOPs",
         "re-runs the whole context"),
    ]
    return format_rows(rows)


def format_rows(rows) -> str:
    """(label, value, note) rows, aligned; a number as value is written short (1.23M)."""
    if not isinstance(rows, (list, tuple)) or not rows or any(
            not isinstance(row, (list, tuple)) or len(row) != 3 for row in rows):
        raise ValueError(f"format_rows: rows must be a non-empty list of (label, value, note) "
                         f"tuples; got {rows!r:.80}")
    for i, (_, value, _) in enumerate(rows):
        if not (isinstance(value, str) or is_real_number(value)):
            raise TypeError(f"format_rows: rows[{i}]'s value is {value!r:.40}; wanted a number "
                            f"or a str")
    rows = [(a, b if isinstance(b, str) else _human(b), c) for a, b, c in rows]
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{a:<{width}}  {b:>12}  {c}".rstrip() for a, b, c in rows)


def matmul_cost(n: int, m: int, k: int) -> dict:
    """A (n×m) · B (m×k): FLOPs 2·n·m·k (a multiply and an add per term) and IO, the numbers moved:
    n·m (read A) + m·k (read B) + n·k (write AB)."""
    for name, value in (("n", n), ("m", m), ("k", k)):
        check_int(value, name, "matmul_cost", what="a matrix dimension")
    return {"flops": 2 * n * m * k, "io": n * m + m * k + n * k}


def _row(operation: str, flops: int, io: int, matmul: bool = True) -> dict:
    return {"operation": operation, "flops": flops, "io": io, "intensity": flops / io,
            "matmul": matmul}


def _batched(count: int, cost: dict) -> dict:
    """``count`` independent products (b·h heads, or 3 projections): FLOPs and IO add up."""
    return {key: count * value for key, value in cost.items()}


def attention_table(b: int, n: int, d: int, h: int, d_ff: int | None = None,
                    decoding: bool = False, bytes_per_number: int = 4) -> dict:
    """One Transformer block's cost, row by row as in the lecture's table (no biases, norms,
    residuals, nor the feed-forward's activation φ, ReLU or GELU).

        rows        x W_q, x W_k, x W_v     3 · (b·q×d)(d×d)             6·b·q·d²
                    scores Q Kᵀ             b·h · (q×d/h)(d/h×n)        2·b·q·n·d
                    softmax(S / √(d/h))     b·h·q·n scores, 6 FLOPs each  O(b·h·q·n)
                    P V                     b·h · (q×n)(n×d/h)          2·b·q·n·d
                    concat(heads) W_o       (b·q×d)(d×d)                 2·b·q·d²
                    FFN  Y W_1, then φ(·) W_2  (b·q×d)(d×d_ff), (b·q×d_ff)(d_ff×d)   4·b·q·d·d_ff
        q = n query positions for a full sequence (decoding=False): O(b·n·d² + b·n²·d) FLOPs,
        O(b·n·d + b·h·n² + d²) IO; q = 1 new token over n cached keys and values (decoding=True):
        O(b·d² + b·n·d) FLOPs -- "one less n" in every cell.

    -> dict: rows (each: operation, flops, io, intensity, matmul), flops, io, intensity (totals),
       attention_numbers (b·h·q·n, the probabilities kept for the backward) and attention_bytes.
    """
    where = "attention_table"
    check_sizes(where, b=b, n=n, d=d, h=h, bytes_per_number=bytes_per_number)
    check_flags(where, decoding=decoding)             # 'no' would be truthy: one token, not n
    check_heads(d, h, where, names=("d", "h"))
    d_ff = feed_forward_width(d_ff, d, where)
    q, d_head = (1 if decoding else n), d // h
    scores = b * h * q * n                                       # entries of the attention matrix
    rows = [
        _row("x W_q, x W_k, x W_v", **_batched(3, matmul_cost(b * q, d, d))),
        _row("scores Q Kᵀ", **_batched(b * h, matmul_cost(q, d_head, n))),
        _row("softmax(S / √(d/h))", SOFTMAX_FLOPS * scores, 2 * scores, matmul=False),
        _row("heads P V", **_batched(b * h, matmul_cost(q, n, d_head))),
        _row("concat(heads) W_o", **matmul_cost(b * q, d, d)),
        _row("FFN Y W_1", **matmul_cost(b * q, d, d_ff)),
        _row("FFN φ(·) W_2", **matmul_cost(b * q, d_ff, d)),
    ]
    flops, io = sum(r["flops"] for r in rows), sum(r["io"] for r in rows)
    return {"rows": rows, "flops": flops, "io": io, "intensity": flops / io,
            "attention_numbers": scores, "attention_bytes": scores * bytes_per_number,
            "decoding": decoding}


def _human(x) -> str:
    """x in T, G, M or k with two decimals; past 999.99T a power of ten reads better."""
    bigger = None                       # the unit above: where 999.996G, written 1000.00G, goes
    for unit, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= size:
            short = f"{x / size:.2f}"
            if abs(float(short)) < 1000:
                return short + unit
            return f"{x / (1000 * size):.2f}{bigger}" if bigger else f"{x:.3g}"
        bigger = unit
    return str(x)


def format_table(table: dict) -> str:
    """``attention_table``'s rows as text: operation, FLOPs, IO, FLOPs per number moved."""
    _check_keys(table, ("rows", "flops", "io", "intensity", "attention_numbers",
                        "attention_bytes", "decoding"),
                "table", "format_table", "what attention_table returns")
    head = ("next token, KV cache" if table["decoding"] else "full sequence", "FLOPs", "IO",
            "FLOPs/IO")
    lines = [(r["operation"], _human(r["flops"]), _human(r["io"]), f"{r['intensity']:.1f}")
             for r in table["rows"]]
    lines.append(("total", _human(table["flops"]), _human(table["io"]),
                  f"{table['intensity']:.1f}"))
    width = max(len(line[0]) for line in [head] + lines)
    text = [f"{a:<{width}}  {b:>9}  {c:>9}  {e:>8}" for a, b, c, e in [head] + lines]
    text.append(f"attention matrix: b·h·q·n = {table['attention_numbers']:,} numbers, "
                f"{_human(table['attention_bytes'])}B")
    return "\n".join(text)
