"""The same DecoderLM in minitf and in torch, with identical weights, and the checks that the two
compute the same thing before anything is timed. Used by vs_torch.py (CPU) and vs_torch_gpu.py.

minitf's model is a DecoderLM of `minitf train`'s kind (pre-LN, tanh-GELU, tied head), with learned
positions or RoPE; torch's is built from its own layers, with minitf's weights copied in. Torch
has no rotary layer: with RoPE its blocks run as the layers' own forward does, step by step, with
q and k turned as complex numbers, the way LLaMA's reference code does it. Inputs are host
(NumPy) arrays; each side moves them to its own device.
"""
import time

import numpy as np
import torch

from configs import BETAS, LR, WEIGHT_DECAY
from minitf import backend
from minitf.functional import rope_angles
from minitf.generate import generate
from minitf.gradcheck import relative_error
from minitf.models import DecoderLM
from minitf.optim import AdamW

LOSS_TOLERANCE, LOGITS_TOLERANCE = 1e-5, 1e-4


# -- the same model in torch ---------------------------------------------------------------------

def gelu_tanh(x):
    return torch.nn.functional.gelu(x, approximate="tanh")


class TorchLM(torch.nn.Module):
    """minitf's DecoderLM from torch parts: token embedding (+ learned positions), pre-LN causal
    TransformerEncoderLayers with tanh-GELU, a final LayerNorm, the head tied to the embedding.
    positional: "learned" (a table added to the embeddings) or "rope" (q and k turned in every
    block, by the angles minitf's rope_angles gives)."""

    def __init__(self, vocab, d_model, n_heads, n_layers, d_ff, max_len, positional="learned"):
        super().__init__()
        self.max_len = max_len
        self.tok = torch.nn.Embedding(vocab, d_model)
        self.pos = torch.nn.Parameter(torch.zeros(max_len, d_model)) if positional == "learned" \
            else None
        self.blocks = torch.nn.ModuleList(torch.nn.TransformerEncoderLayer(
            d_model, n_heads, d_ff, dropout=0.0, activation=gelu_tanh, batch_first=True,
            norm_first=True) for _ in range(n_layers))
        self.norm = torch.nn.LayerNorm(d_model)
        if positional == "rope":                   # e^{iθ[p, i]} for every position, once
            cos, sin = rope_angles(max_len, d_model // n_heads, dtype="float64", xp=np)
            self.register_buffer("turns", torch.complex(torch.from_numpy(cos),
                                                        torch.from_numpy(sin)).to(torch.complex64))
        else:
            self.turns = None

    def embed(self, ids, offset=0):
        """Token embeddings (+ positions offset … offset + n − 1 when they are learned)."""
        x = self.tok(ids)
        return x if self.pos is None else x + self.pos[offset:offset + ids.shape[1]]

    def forward(self, ids):
        n = ids.shape[1]
        x = self.embed(ids)
        if self.turns is not None:
            for block in self.blocks:
                x = block_by_hand(block, x, self.turns[:n])
            return self.norm(x) @ self.tok.weight.T
        mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)   # True: masked out
        for block in self.blocks:
            # is_causal: torch may then skip the mask and run its causal attention kernel
            x = block(x, src_mask=mask, is_causal=True)
        return self.norm(x) @ self.tok.weight.T


def rotate(x, turns):
    """RoPE in torch: the feature pairs of x (b, h, n, d_head) as complex numbers, times
    turns (n, d_head/2) = e^{iθ}."""
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))         # (b, h, n, d_head/2)
    return torch.view_as_real(pairs * turns).flatten(-2)


def block_by_hand(layer, x, turns, cache=None, offset=0):
    """One pre-LN block from a TransformerEncoderLayer's weights, as its forward computes it, but
    q and k turned by ``turns`` (None: not turned) and, with a ``cache`` (2, b, h, max_len,
    d_head), the new keys and values written there at ``offset`` and all of them attended to."""
    attention = layer.self_attn
    b, n, d_model = x.shape
    h = attention.num_heads
    qkv = torch.nn.functional.linear(layer.norm1(x), attention.in_proj_weight,
                                     attention.in_proj_bias)                # (b, n, 3 d_model)
    q, k, v = qkv.view(b, n, 3, h, d_model // h).permute(2, 0, 3, 1, 4)   # (b, h, n, d_head)
    if turns is not None:
        q, k = rotate(q, turns), rotate(k, turns)
    if cache is not None:
        cache[0, :, :, offset:offset + n], cache[1, :, :, offset:offset + n] = k, v
        k, v = cache[:, :, :, :offset + n]                        # (b, h, offset + n, d_head)
    # only the prompt needs the causal mask: a single new token may see every cached one
    context = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=n > 1)
    x = x + attention.out_proj(context.transpose(1, 2).reshape(b, n, d_model))
    return x + layer.linear2(gelu_tanh(layer.linear1(layer.norm2(x))))


def weight_pairs(theirs):
    """(minitf parameter name, torch parameter, transposed?) for every parameter. minitf keeps a
    linear map's W as (d_in, d_out), torch as (d_out, d_in); both stack q, k, v as [q | k | v]."""
    pairs = [("tok_emb.W", theirs.tok.weight, False),
             ("norm.gamma", theirs.norm.weight, False), ("norm.beta", theirs.norm.bias, False)]
    if theirs.pos is not None:
        pairs.append(("pos_emb.W", theirs.pos, False))
    for i, layer in enumerate(theirs.blocks):
        at, mha = f"blocks.blocks.{i}.", layer.self_attn
        for name, W, b in (("self_attn.layer.W_qkv", mha.in_proj_weight, mha.in_proj_bias),
                           ("self_attn.layer.W_o", mha.out_proj.weight, mha.out_proj.bias),
                           ("ffn.layer.W_1", layer.linear1.weight, layer.linear1.bias),
                           ("ffn.layer.W_2", layer.linear2.weight, layer.linear2.bias)):
            pairs += [(f"{at}{name}.W", W, True), (f"{at}{name}.b", b, False)]
        for name, norm in (("self_attn.norm", layer.norm1), ("ffn.norm", layer.norm2)):
            pairs += [(f"{at}{name}.gamma", norm.weight, False),
                      (f"{at}{name}.beta", norm.bias, False)]
    return pairs


def build(config, vocab, max_len):
    """The two models, minitf's weights (seed 0) copied into torch's. config: d_model, n_layers,
    n_heads, positional; max_len: the longest context either will see."""
    backend.seed(0)
    ours = DecoderLM(vocab, config.d_model, config.n_heads, config.n_layers, max_len=max_len,
                     positional=config.positional)
    theirs = TorchLM(vocab, config.d_model, config.n_heads, config.n_layers, ours.config["d_ff"],
                     max_len, config.positional)
    params, pairs = dict(ours.named_parameters()), weight_pairs(theirs)
    if sorted(name for name, _, _ in pairs) != sorted(params) \
            or len(pairs) != len(list(theirs.parameters())):
        raise SystemExit("the weight map does not cover both models' parameters one to one")
    with torch.no_grad():
        for name, tensor, transposed in pairs:
            W = backend.to_numpy(params[name].data)
            tensor.copy_(torch.from_numpy(np.ascontiguousarray(W.T if transposed else W)))
    return ours, theirs


def optimizers(ours, theirs):
    """AdamW with `minitf train`'s settings, decaying the linear maps' weights only, as minitf's."""
    linear = {id(tensor) for _, tensor, transposed in weight_pairs(theirs) if transposed}
    groups = [{"params": [p for p in theirs.parameters() if (id(p) in linear) == decay],
               "weight_decay": WEIGHT_DECAY if decay else 0.0} for decay in (True, False)]
    return (AdamW(ours, LR, betas=BETAS, weight_decay=WEIGHT_DECAY),
            torch.optim.AdamW(groups, lr=LR, betas=BETAS))


def on_device_of(theirs, *arrays):
    """Host arrays as torch tensors on the device of the torch model ``theirs``."""
    device = theirs.tok.weight.device
    return [torch.from_numpy(a).to(device) for a in arrays]


def no_sync():
    """On the CPU every step has finished when it returns: nothing to wait for."""


@torch.no_grad()
def torch_decode(theirs, prompt, n_tokens, forced=None, sync=no_sync):
    """Greedy generation with a KV cache over the torch layers' weights: each step runs the blocks
    on the new token only, and writes its keys and values in place into each layer's cache, here
    allocated once for the whole context (minitf's KVCache doubles its buffer when full): neither
    copies the whole cache at every token.
    prompt: (b, n0) ids;  forced: (b, n_tokens) tokens to feed instead of the argmax (the check)
    -> seconds per token (n_tokens,), the logits of every step (b, n_tokens, V)"""
    b, d_model = prompt.shape[0], theirs.tok.embedding_dim
    h = theirs.blocks[0].self_attn.num_heads
    cache = torch.zeros(len(theirs.blocks), 2, b, h, theirs.max_len, d_model // h,
                        device=theirs.tok.weight.device)                       # k and v
    (new,), offset, stamps, logits = on_device_of(theirs, prompt), 0, [time.perf_counter()], []
    forced = None if forced is None else on_device_of(theirs, forced)[0]
    for t in range(n_tokens):
        n = new.shape[1]
        x = theirs.embed(new, offset)                                        # (b, n, d_model)
        turns = None if theirs.turns is None else theirs.turns[offset:offset + n]
        for i, layer in enumerate(theirs.blocks):
            x = block_by_hand(layer, x, turns, cache[i], offset)
        last = theirs.norm(x[:, -1]) @ theirs.tok.weight.T                   # (b, V)
        logits.append(last)
        new = (last.argmax(-1) if forced is None else forced[:, t])[:, None]
        offset += n
        sync()
        stamps.append(time.perf_counter())
    return np.diff(stamps), torch.stack(logits, dim=1).cpu().numpy()


# -- the checks: no figure unless the two compute the same thing --------------------------------

def check_same_loss(ours, theirs, x, y):
    ours_loss, _ = ours.loss(backend.to_device(x), backend.to_device(y))
    tx, ty = on_device_of(theirs, x, y)
    with torch.no_grad():
        theirs_loss = float(torch.nn.functional.cross_entropy(theirs(tx).flatten(0, 1),
                                                              ty.flatten()))
    difference = abs(ours_loss - theirs_loss) / abs(theirs_loss)
    losses = f"minitf {ours_loss:.7f}, torch {theirs_loss:.7f}, rel. difference {difference:.1e}"
    if not difference <= LOSS_TOLERANCE:
        raise SystemExit(f"same-loss check FAILED: {losses} > {LOSS_TOLERANCE:.0e}; the models "
                         f"differ, so no timing is reported")
    return f"same-loss check passed: {losses}"


def check_same_decoding(ours, theirs, prompt, n_tokens=32):
    ids, ours_logits = generate(ours, backend.to_device(prompt), n_tokens, greedy=True,
                                return_logits=True)
    ids, ours_logits = backend.to_numpy(ids), backend.to_numpy(ours_logits)
    _, theirs_logits = torch_decode(theirs, prompt, n_tokens, forced=ids[:, prompt.shape[1]:])
    error = relative_error(ours_logits, theirs_logits)
    if not error <= LOGITS_TOLERANCE:
        raise SystemExit(f"same-decoding check FAILED: the logits of {n_tokens} cached steps "
                         f"differ by {error:.1e} > {LOGITS_TOLERANCE:.0e}; no timing is reported")
    return f"same-decoding check passed: {n_tokens} cached steps, logits rel. error {error:.1e}"
