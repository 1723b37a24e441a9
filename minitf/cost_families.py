"""The cost model of the other model families: the recurrent baseline, the encoder–decoder
Transformer, the encoders (CLS-token classifiers, BERT's masked language model, the set
encoder) -- and one table for any checkpoint (``minitf info``).

    recurrent layer    FLOPs O(n·d²)   sequential steps O(n)   path between two positions O(n)
    self-attention     FLOPs O(n²·d)   sequential steps O(1)   path between two positions O(1)

A recurrent layer does less arithmetic than attention once n > d, but its n steps must run one
after the other (step t needs h_{t−1}), and a signal from token 1 reaches position n only through
n − 1 steps of the recurrence; attention connects any two positions in one step.

The encoder–decoder Transformer, N source and M target tokens, pays three attention terms per
layer: N² (encoder self-attention), M² (decoder self-attention) and M·N (cross-attention: M
queries, N keys). Parameter counts are exact: the tests compare them with num_parameters().
"""
from __future__ import annotations

from minitf.cost import (LM_CONFIG, _check_config, block_parameters, format_cost, format_rows,
                         lm_cost, lm_cost_of, matmul_cost)
from minitf.validate import check_flags, check_heads, check_int, check_sizes, feed_forward_width

GATES = {"rnn": 1, "lstm": 4}          # stacked weight blocks: tanh; i, f, g, o

# What describe_cost reads from each family's config: its sizes (whole numbers), then the others
CONFIG = {
    "lm": LM_CONFIG,
    "rnn": ("vocab_size d_model d_hidden max_len", "cell"),
    "seq2seq": ("src_vocab_size tgt_vocab_size d_model n_heads n_layers d_ff",
                "pre_ln share_embeddings"),
    "classifier": ("vocab_size max_len d_model n_heads n_layers d_ff n_classes", ""),
    "vit": ("image_size patch_size channels d_model n_heads n_layers d_ff n_classes", ""),
    "mlm": ("vocab_size d_model n_heads n_layers d_ff max_len", ""),
    # max_len None: no positions, and a set of any size
    "set": ("d_in n_classes d_model n_heads n_layers d_ff max_len", "pooling"),
}


def layer_comparison(n: int, d: int) -> dict:
    """One layer over n positions of width d, counted as the lectures' table does:
    {"self-attention": …, "recurrent": …}, each with flops, sequential_steps, path_length.

    self-attention: q kᵀ and P v, two (n×d)(d×n)-sized products: 4·n²·d FLOPs, all at once.
    recurrent: n steps of x_t W_x + h_{t−1} W_h, two (1×d)(d×d) products each: 4·n·d² FLOPs.
    """
    for name, value in (("n", n), ("d", d)):
        check_int(value, name, "layer_comparison")
    return {"self-attention": {"flops": 2 * matmul_cost(n, d, n)["flops"],
                               "sequential_steps": 1, "path_length": 1},
            "recurrent": {"flops": n * 2 * matmul_cost(1, d, d)["flops"],
                          "sequential_steps": n, "path_length": n - 1}}


def rnn_cost(vocab_size: int, d_model: int, d_hidden: int | None = None, cell: str = "rnn",
             context: int = 256, batch_size: int = 1) -> dict:
    """Parameters, FLOPs, sequential steps and state size of ``RNNLM`` with this configuration.

    -> dict with parameters (exact), forward FLOPs per token (2·g·(d·d_h + d_h²) + 2·d_h·V, g
       gates), training FLOPs per step of batch_size × context tokens, sequential_steps (n: one
       per token), path_length (n − 1 steps from the first token to the last position), and
       state_numbers: what generation carries, b·d_h (·2 for an LSTM's cell), whatever n is.
    """
    if cell not in GATES:
        raise ValueError(f"rnn_cost: cell must be one of {tuple(GATES)}; got {cell!r}")
    check_sizes("rnn_cost", vocab_size=vocab_size, d_model=d_model, context=context,
                batch_size=batch_size, **({} if d_hidden is None else {"d_hidden": d_hidden}))
    d, d_h, n, b = d_model, d_model if d_hidden is None else d_hidden, context, batch_size
    g = GATES[cell]
    recurrent = g * (d * d_h + d_h * d_h + d_h)                     # W_x, W_h, b
    forward = 2 * g * (d * d_h + d_h * d_h) + 2 * d_h * vocab_size  # a token: the layer, the head
    return {"parameters": vocab_size * d + recurrent + d_h * vocab_size + vocab_size,
            "recurrent_parameters": recurrent,
            "forward_flops_per_token": forward,
            "training_flops_per_step": 3 * forward * b * n,
            "sequential_steps": n, "path_length": n - 1,
            "state_numbers": b * d_h * (2 if cell == "lstm" else 1),
            "decode_flops": b * forward}


def _decoder_block_parameters(d: int, d_ff: int) -> int:
    """Self-attention, cross-attention (4d² + 4d each), the FFN, three LayerNorms."""
    encoder = block_parameters(d, d_ff)["exact"]                # self-attention, FFN, two norms
    return encoder + 4 * d * d + 4 * d + 2 * d


def seq2seq_cost(src_len: int, tgt_len: int, src_vocab_size: int, tgt_vocab_size: int,
                 d_model: int = 64, n_heads: int = 4, n_layers: int = 2, d_ff: int | None = None,
                 pre_ln: bool = False, share_embeddings: bool = False,
                 batch_size: int = 1) -> dict:
    """The encoder–decoder ``Transformer`` on N = src_len source and M = tgt_len target tokens.

    -> dict with parameters (exact); attention_scores, per kind, the entries of the attention
       matrices (b·h·L·N², b·h·L·M², b·h·L·M·N); attention_flops, per kind, the FLOPs of q kᵀ
       and P v (4·b·L·N²·d, 4·b·L·M²·d, 4·b·L·M·N·d); and forward_flops, these plus every
       projection, FFN and the output layer.
    """
    N, M, d, L, b = src_len, tgt_len, d_model, n_layers, batch_size
    check_sizes("seq2seq_cost", src_len=N, tgt_len=M, src_vocab_size=src_vocab_size,
                tgt_vocab_size=tgt_vocab_size, d_model=d, n_heads=n_heads, n_layers=L,
                batch_size=b)
    check_flags("seq2seq_cost", pre_ln=pre_ln, share_embeddings=share_embeddings)
    check_heads(d, n_heads, "seq2seq_cost")
    if share_embeddings and src_vocab_size != tgt_vocab_size:
        raise ValueError(f"seq2seq_cost: share_embeddings needs one vocabulary; got "
                         f"src_vocab_size={src_vocab_size}, tgt_vocab_size={tgt_vocab_size}")
    d_ff = feed_forward_width(d_ff, d, "seq2seq_cost")
    embeddings = src_vocab_size * d + (0 if share_embeddings else tgt_vocab_size * d)
    parameters = (embeddings + L * (block_parameters(d, d_ff)["exact"]
                                    + _decoder_block_parameters(d, d_ff))
                  + (4 * d if pre_ln else 0) + d * tgt_vocab_size + tgt_vocab_size)
    pairs = {"encoder self-attention": N * N, "decoder self-attention": M * M,
             "cross-attention": M * N}
    scores = {kind: b * n_heads * L * count for kind, count in pairs.items()}
    attention = {kind: 4 * b * L * count * d for kind, count in pairs.items()}
    projections = 2 * b * L * (N * (4 * d * d + 2 * d * d_ff)                # encoder blocks
                               + M * (6 * d * d + 2 * d * d_ff)              # q, o ×2; self k, v
                               + N * 2 * d * d)                              # cross k, v: memory
    return {"parameters": parameters, "attention_scores": scores, "attention_flops": attention,
            "forward_flops": projections + sum(attention.values()) + 2 * b * M * d * tgt_vocab_size}


def seq2seq_cost_of(config: dict, src_len: int, tgt_len: int, batch_size: int = 1) -> dict:
    """``seq2seq_cost`` of a Transformer given by its ``config`` (``model.config``, a checkpoint's)."""
    check_sizes("seq2seq_cost_of", src_len=src_len, tgt_len=tgt_len, batch_size=batch_size)
    _check_config(config, "seq2seq", CONFIG["seq2seq"], "seq2seq_cost_of")
    c = config
    return seq2seq_cost(src_len, tgt_len, c["src_vocab_size"], c["tgt_vocab_size"], c["d_model"],
                        c["n_heads"], c["n_layers"], c["d_ff"], c["pre_ln"],
                        c["share_embeddings"], batch_size)


def encoder_cost(n_tokens: int, d_model: int, n_heads: int, n_layers: int, d_ff: int,
                 n_classes: int, embedding_parameters: int, batch_size: int = 1,
                 cls: bool = True, positions: bool = True) -> dict:
    """A classifying encoder (EncoderClassifier, VisionTransformer, SetEncoder) on n tokens (+1
    for CLS): parameters (exact, given the embedding's own) and the b·h·L·(n+1)² attention
    scores. cls=False: no CLS token (SetEncoder's mean pooling), b·h·L·n² scores;
    positions=False: no learned positions (a set has no order)."""
    check_sizes("encoder_cost", n_tokens=n_tokens, d_model=d_model, n_heads=n_heads,
                n_layers=n_layers, d_ff=d_ff, n_classes=n_classes, batch_size=batch_size)
    check_int(embedding_parameters, "embedding_parameters", "encoder_cost", low=0,
              what="the token or patch embedding's own parameters")
    check_flags("encoder_cost", cls=cls, positions=positions)
    check_heads(d_model, n_heads, "encoder_cost")
    n, d = n_tokens + cls, d_model
    parameters = (embedding_parameters + cls * d + positions * n * d
                  + n_layers * block_parameters(d, d_ff)["exact"]
                  + 2 * d + d * n_classes + n_classes)     # CLS, positions, blocks, norm, head
    return {"parameters": parameters, "attention_scores": batch_size * n_heads * n_layers * n * n}


def mlm_cost(vocab_size: int, d_model: int, n_heads: int, n_layers: int, d_ff: int | None,
             max_len: int, n_segments: int = 0, batch_size: int = 1) -> dict:
    """BERT's ``EncoderLM``: DecoderLM's parameters with learned positions and a tied head, plus
    the segment table (n_segments × d), and b·h·L·n² attention scores at n = max_len (no causal
    mask: every token attends to all n)."""
    check_sizes("mlm_cost", vocab_size=vocab_size, d_model=d_model, n_heads=n_heads,
                max_len=max_len, batch_size=batch_size)
    check_int(n_layers, "n_layers", "mlm_cost", low=0, what="the number of blocks")
    check_int(n_segments, "n_segments", "mlm_cost", low=0, what="the number of segments")
    check_heads(d_model, n_heads, "mlm_cost")
    d_ff = feed_forward_width(d_ff, d_model, "mlm_cost")
    cost = lm_cost(vocab_size, d_model, n_layers, d_ff, context=max_len, batch_size=batch_size,
                   n_heads=n_heads)
    return {"parameters": cost["parameters"] + n_segments * d_model,
            "attention_scores": batch_size * n_heads * n_layers * max_len ** 2}


def _parameters(count: int) -> tuple:
    return ("parameters (exact)", count, f"{count:,}")


def describe_cost(kind: str, config: dict, batch_size: int = 1, bytes_per_number: int = 4,
                  context: int = 128) -> str:
    """The table ``minitf info`` prints for a model of family ``kind`` built from ``config``;
    ``context`` is N = M, the source and target lengths, for the encoder–decoder, and the size
    of a set for a SetEncoder without max_len (their configs set no limit); the other families
    read theirs from the config."""
    # kind and config first: a config of another family would otherwise fail as a bare KeyError
    if not isinstance(kind, str) or kind not in CONFIG:
        raise ValueError(f"describe_cost: unknown model kind {kind!r}; wanted one of "
                         f"{tuple(CONFIG)}")
    _check_config(config, kind, CONFIG[kind], "describe_cost")
    check_sizes("describe_cost", batch_size=batch_size, bytes_per_number=bytes_per_number,
                context=context)
    c, b = config, batch_size
    if kind == "lm":
        return format_cost(lm_cost_of(c, b, bytes_per_number))
    if kind == "rnn":
        cost = rnn_cost(c["vocab_size"], c["d_model"], c["d_hidden"], c["cell"], c["max_len"], b)
        n = c["max_len"]
        return format_rows([
            _parameters(cost["parameters"]),
            ("forward FLOPs per token", cost["forward_flops_per_token"], "any context"),
            ("training FLOPs per step", cost["training_flops_per_step"], "≈ 3 × forward"),
            ("sequential steps", cost["sequential_steps"], f"one per token (n = {n})"),
            ("path, first to last token", cost["path_length"], "steps of the recurrence"),
            ("state carried", cost["state_numbers"], "numbers, whatever the context"),
        ])
    if kind == "seq2seq":
        n = context
        cost = seq2seq_cost_of(c, n, n, b)
        return format_rows([_parameters(cost["parameters"]),
                            ("forward FLOPs", cost["forward_flops"], f"N = M = {n} tokens")]
                           + [(f"  {kind} scores", count, "b·h·L·" + pair) for (kind, count), pair
                              in zip(cost["attention_scores"].items(), ("N²", "M²", "M·N"))])
    return format_rows(_encoder_rows(kind, c, b, context))


def _segments(config: dict) -> int:
    """BERT's segment table's rows: in a classifier's config only where there is one."""
    segments = config.get("n_segments", 0)
    check_int(segments, "config['n_segments']", "describe_cost", low=0)
    return segments


def _encoder_rows(kind: str, c: dict, b: int, context: int) -> list:
    """describe_cost's rows for an encoder: "mlm", "set", "classifier" or "vit"."""
    if kind == "mlm":
        n = c["max_len"]
        cost = mlm_cost(c["vocab_size"], c["d_model"], c["n_heads"], c["n_layers"], c["d_ff"], n,
                        _segments(c), b)
        return [_parameters(cost["parameters"]),
                ("attention scores", cost["attention_scores"],
                 f"b·h·L·n², n = {n} tokens, each seeing all n")]
    cls = positions = True
    if kind == "classifier":
        n, embedding = c["max_len"], (c["vocab_size"] + _segments(c)) * c["d_model"]
    elif kind == "set":
        if c["pooling"] not in ("cls", "mean"):            # as SetEncoder refuses it
            raise ValueError(f"describe_cost: config['pooling'] must be 'cls' or 'mean'; got "
                             f"{c['pooling']!r}")
        cls, positions = c["pooling"] == "cls", c["max_len"] is not None
        n = c["max_len"] if positions else context
        embedding = (c["d_in"] + 1) * c["d_model"]                     # W_in and b
    else:
        if c["image_size"] % c["patch_size"]:              # as VisionTransformer refuses it
            raise ValueError(f"describe_cost: config['image_size']={c['image_size']} is not a "
                             f"multiple of config['patch_size']={c['patch_size']}")
        n = (c["image_size"] // c["patch_size"]) ** 2
        embedding = (c["patch_size"] ** 2 * c["channels"] + 1) * c["d_model"]
    d_ff = feed_forward_width(c["d_ff"], c["d_model"], "describe_cost")
    cost = encoder_cost(n, c["d_model"], c["n_heads"], c["n_layers"], d_ff, c["n_classes"],
                        embedding, b, cls=cls, positions=positions)
    tokens = "elements" if kind == "set" else "tokens"
    note = (f"b·h·L·(n+1)², n = {n} {tokens} and the CLS" if cls
            else f"b·h·L·n², n = {n} {tokens}")
    note += "" if positions else " (a set of any size: n is the context given)"
    return [_parameters(cost["parameters"]), ("attention scores", cost["attention_scores"], note)]

