"""Parity with PyTorch on identical weights: the forward output and every gradient (inputs and
parameters), float64 within 1e-9 and float32 within 1e-4 relative error (the whole-tensor
relative error of minitf.gradcheck). Needs the optional ``torch`` extra."""

import os

import numpy as np
import pytest

import minitf.functional as F
import minitf.models as models
import minitf.nn as nn
from minitf import backend
from minitf.gradcheck import relative_error

torch = pytest.importorskip("torch")

TOLERANCE = {"float64": 1e-9, "float32": 1e-4}
DTYPES = list(TOLERANCE)


@pytest.fixture(params=DTYPES)
def dtype(request, backend_name):
    with backend.precision(request.param):
        yield request.param


def torch_tensor(a, requires_grad=False):
    return torch.from_numpy(np.array(backend.to_numpy(a))).requires_grad_(requires_grad)


def assert_close(ours, theirs, dtype, what):
    theirs = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else theirs
    error = relative_error(backend.to_numpy(ours), theirs)
    if os.environ.get("MINITF_PARITY_LOG"):   # every comparison's error: benchmarks/parity_errors.py
        with open(os.environ["MINITF_PARITY_LOG"], "a", encoding="utf-8") as log:
            test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
            log.write(f"{test}\t{what}\t{np.dtype(dtype).name}\t{error!r}\n")
    assert error <= TOLERANCE[dtype], f"{what}: relative error {error:.2e} > {TOLERANCE[dtype]:.0e}"


# -- reading a torch module's parameters as ours ------------------------------------------------

def _t(w):
    return w.T


def linear_map(prefix, torch_linear):
    return {f"{prefix}W": (torch_linear.weight, _t), f"{prefix}b": (torch_linear.bias, None)}


def norm_map(prefix, torch_norm):
    return {f"{prefix}gamma": (torch_norm.weight, None), f"{prefix}beta": (torch_norm.bias, None)}


def attention_map(prefix, mha, cross=False):
    """nn.MultiheadAttention keeps q, k, v stacked in in_proj_weight (3d, d), rows [q; k; v]."""
    d = mha.embed_dim
    w, b = mha.in_proj_weight, mha.in_proj_bias
    if cross:
        mapping = {f"{prefix}W_q.W": (w, lambda t: t[:d].T), f"{prefix}W_q.b": (b, lambda t: t[:d]),
                   f"{prefix}W_kv.W": (w, lambda t: t[d:].T), f"{prefix}W_kv.b": (b, lambda t: t[d:])}
    else:
        mapping = {f"{prefix}W_qkv.W": (w, _t), f"{prefix}W_qkv.b": (b, None)}
    return {**mapping, **linear_map(f"{prefix}W_o.", mha.out_proj)}


def sublayer_map(prefix, layer_map, torch_norm):
    return {**layer_map, **norm_map(f"{prefix}norm.", torch_norm)}


def ffn_map(prefix, layer):
    return {**linear_map(f"{prefix}layer.W_1.", layer.linear1),
            **linear_map(f"{prefix}layer.W_2.", layer.linear2)}


def encoder_map(layer):
    return {**sublayer_map("self_attn.", attention_map("self_attn.layer.", layer.self_attn),
                           layer.norm1),
            **sublayer_map("ffn.", ffn_map("ffn.", layer), layer.norm2)}


def decoder_map(layer):
    return {**sublayer_map("self_attn.", attention_map("self_attn.layer.", layer.self_attn),
                           layer.norm1),
            **sublayer_map("cross_attn.",
                           attention_map("cross_attn.layer.", layer.multihead_attn, cross=True),
                           layer.norm2),
            **sublayer_map("ffn.", ffn_map("ffn.", layer), layer.norm3)}


def _read(tensor, view):
    tensor = tensor.detach()
    return (view(tensor) if view else tensor).numpy()


def copy_weights(ours, mapping):
    """Load the torch parameters into ours; the mapping must cover every parameter we have."""
    assert set(mapping) == {name for name, _ in ours.named_parameters()}
    ours.load_state_dict({name: _read(t, view) for name, (t, view) in mapping.items()})


def compare_gradients(ours, mapping, dtype):
    params = dict(ours.named_parameters())
    for name, (tensor, view) in mapping.items():
        assert_close(params[name].grad, _read(tensor.grad, view), dtype, f"gradient of {name}")


def run_both(ours, theirs, inputs, dtype, ours_kwargs=None, theirs_kwargs=None):
    """Forward both on the same inputs, backward the same random gradient; compare outputs and
    input gradients. Returns the torch output for further checks."""
    arrays = [backend.randn(*shape) for shape in inputs]
    tensors = [torch_tensor(a, requires_grad=True) for a in arrays]
    y = ours(*arrays, **(ours_kwargs or {}))
    y_torch = theirs(*tensors, **(theirs_kwargs or {}))
    y_torch = y_torch[0] if isinstance(y_torch, tuple) else y_torch
    assert_close(y, y_torch, dtype, "output")
    g = backend.randn(*y.shape)
    input_grads = ours.backward(g)
    y_torch.backward(torch_tensor(g))
    input_grads = input_grads if isinstance(input_grads, tuple) else (input_grads,)
    for i, (dx, t) in enumerate(zip(input_grads, tensors)):
        assert_close(dx, t.grad, dtype, f"gradient of input {i}")
    return y_torch


def torch_module(module, dtype):
    return module.to(getattr(torch, dtype)).train()


# -- layers -------------------------------------------------------------------------------------

def test_linear(dtype):
    theirs = torch_module(torch.nn.Linear(5, 3), dtype)
    ours = nn.Linear(5, 3)
    mapping = linear_map("", theirs)
    copy_weights(ours, mapping)
    run_both(ours, theirs, [(2, 4, 5)], dtype)
    compare_gradients(ours, mapping, dtype)


def test_embedding(dtype):
    theirs = torch_module(torch.nn.Embedding(11, 4), dtype)
    ours = nn.Embedding(11, 4)
    copy_weights(ours, {"W": (theirs.weight, None)})
    ids = backend.randint(0, 11, (3, 7))
    y = ours(ids)
    y_torch = theirs(torch.from_numpy(backend.to_numpy(ids)))
    assert_close(y, y_torch, dtype, "output")
    g = backend.randn(*y.shape)
    ours.backward(g)
    y_torch.backward(torch_tensor(g))
    assert_close(ours.W.grad, theirs.weight.grad, dtype, "gradient of W")


def test_layer_norm(dtype):
    theirs = torch_module(torch.nn.LayerNorm(6), dtype)
    with torch.no_grad():
        theirs.weight.normal_()
        theirs.bias.normal_()
    ours = nn.LayerNorm(6)
    mapping = norm_map("", theirs)
    copy_weights(ours, mapping)
    run_both(ours, theirs, [(2, 3, 6)], dtype)
    compare_gradients(ours, mapping, dtype)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(dtype, approximate):
    run_both(nn.GELU(approximate), torch.nn.GELU(approximate=approximate), [(3, 8)], dtype)


def test_softmax_and_log_softmax(dtype):
    x = backend.randn(3, 4, 7)
    x[0, 1, 2] = -np.inf                       # a masked entry (a fully masked row is NaN in torch)
    g = backend.randn(3, 4, 7)
    for ours, ours_backward, theirs in ((F.softmax, F.softmax_backward, torch.softmax),
                                        (F.log_softmax, F.log_softmax_backward, torch.log_softmax)):
        t = torch_tensor(x, requires_grad=True)
        y, cache = ours(x)
        y_torch = theirs(t, dim=-1)
        finite = np.isfinite(backend.to_numpy(y))
        assert_close(backend.to_numpy(y)[finite], y_torch.detach().numpy()[finite], dtype, "output")
        y_torch.backward(torch_tensor(g))
        assert_close(ours_backward(g, cache), t.grad, dtype, f"gradient of {ours.__name__}")


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_cross_entropy(dtype, label_smoothing):
    logits = backend.randn(3, 5, 9)
    targets = backend.randint(0, 9, (3, 5))
    targets[0, :2] = -100
    targets[2, 4] = -100
    loss, cache = F.cross_entropy(logits, targets, ignore_index=-100,
                                  label_smoothing=label_smoothing)
    t = torch_tensor(logits, requires_grad=True)
    loss_torch = torch.nn.functional.cross_entropy(
        t.reshape(-1, 9), torch.from_numpy(backend.to_numpy(targets)).reshape(-1),
        ignore_index=-100, label_smoothing=label_smoothing)
    assert_close(loss, loss_torch, dtype, "loss")
    loss_torch.backward(torch.tensor(0.7, dtype=t.dtype))
    assert_close(F.cross_entropy_backward(0.7, cache), t.grad, dtype, "gradient of logits")


# -- attention and blocks -----------------------------------------------------------------------

def torch_causal(n):
    """torch's boolean causal mask (n, n): True where attention is NOT allowed."""
    return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)


def torch_padding(lengths, n):
    """torch's key-padding mask (b, n): True where the key is padding (the opposite of ours)."""
    return torch.arange(n)[None, :] >= torch.tensor(lengths)[:, None]


def test_self_attention_with_causal_and_padding_masks(dtype):
    """Our mask argument, additive (b, 1, n, n), against torch's attn_mask + key_padding_mask."""
    theirs = torch_module(torch.nn.MultiheadAttention(8, 2, batch_first=True), dtype)
    ours = nn.MultiHeadAttention(8, 2)
    mapping = attention_map("", theirs)
    copy_weights(ours, mapping)
    lengths = [5, 3]
    mask = F.combine_masks(F.causal_mask(5), F.padding_mask(lengths, 5))
    run_both(ours, lambda x: theirs(x, x, x, attn_mask=torch_causal(5),
                                    key_padding_mask=torch_padding(lengths, 5))[0],
             [(2, 5, 8)], dtype, ours_kwargs={"mask": mask})
    compare_gradients(ours, mapping, dtype)


def test_attention_weights_match(dtype):
    theirs = torch_module(torch.nn.MultiheadAttention(8, 4, batch_first=True), dtype)
    ours = nn.MultiHeadAttention(8, 4, causal=True)
    copy_weights(ours, attention_map("", theirs))
    x = backend.randn(2, 6, 8)
    ours(x)
    t = torch_tensor(x)
    _, probs = theirs(t, t, t, attn_mask=torch_causal(6), need_weights=True,
                      average_attn_weights=False)
    assert_close(ours.probs, probs, dtype, "attention probabilities")


def test_cross_attention_with_memory_padding(dtype):
    theirs = torch_module(torch.nn.MultiheadAttention(8, 2, batch_first=True), dtype)
    ours = nn.MultiHeadAttention(8, 2, cross=True)
    mapping = attention_map("", theirs, cross=True)
    copy_weights(ours, mapping)
    lengths = [6, 2]
    padding = torch_padding(lengths, 6)
    run_both(ours, lambda x, memory: theirs(x, memory, memory, key_padding_mask=padding)[0],
             [(2, 4, 8), (2, 6, 8)], dtype, ours_kwargs={"mask": F.padding_mask(lengths, 6)})
    compare_gradients(ours, mapping, dtype)


@pytest.mark.parametrize("pre_ln", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("activation, eps, bias", [("relu", 1e-5, True), ("gelu_exact", 1e-5, True),
                                                   ("relu", 1e-12, False)],
                         ids=["relu", "gelu_exact", "BERT's eps, no biases"])
def test_encoder_block(dtype, pre_ln, activation, eps, bias):
    theirs = torch_module(torch.nn.TransformerEncoderLayer(
        8, 2, 16, dropout=0.0, activation="relu" if activation == "relu" else "gelu",
        batch_first=True, norm_first=pre_ln, layer_norm_eps=eps, bias=bias), dtype)
    ours = nn.EncoderBlock(8, 2, 16, pre_ln=pre_ln, activation=activation, eps=eps, bias=bias)
    # torch's bias=False also takes β from its LayerNorms; ours keep β, held at 0 here.
    mapping = {name: entry for name, entry in encoder_map(theirs).items() if entry[0] is not None}
    zero_betas = {name: (torch.zeros(8, dtype=getattr(torch, dtype)), None)
                  for name, _ in ours.named_parameters() if name.endswith("norm.beta")}
    copy_weights(ours, {**zero_betas, **mapping})
    lengths = [5, 3]
    padding = torch_padding(lengths, 5)
    run_both(ours, lambda x: theirs(x, src_key_padding_mask=padding), [(2, 5, 8)], dtype,
             ours_kwargs={"mask": F.padding_mask(lengths, 5)})
    compare_gradients(ours, mapping, dtype)


@pytest.mark.parametrize("pre_ln", [False, True], ids=["post-LN", "pre-LN"])
def test_decoder_block(dtype, pre_ln):
    theirs = torch_module(torch.nn.TransformerDecoderLayer(
        8, 2, 16, dropout=0.0, batch_first=True, norm_first=pre_ln), dtype)
    ours = nn.DecoderBlock(8, 2, 16, pre_ln=pre_ln)
    mapping = decoder_map(theirs)
    copy_weights(ours, mapping)
    target_lengths, memory_lengths = [4, 3], [6, 2]
    target_padding = torch_padding(target_lengths, 4)
    memory_padding = torch_padding(memory_lengths, 6)
    run_both(ours,
             lambda x, memory: theirs(x, memory, tgt_mask=torch_causal(4),
                                      tgt_key_padding_mask=target_padding,
                                      memory_key_padding_mask=memory_padding),
             [(2, 4, 8), (2, 6, 8)], dtype,
             ours_kwargs={"mask": F.padding_mask(target_lengths, 4),
                          "memory_mask": F.padding_mask(memory_lengths, 6)})
    compare_gradients(ours, mapping, dtype)


# -- a whole decoder-only language model ----------------------------------------------------------

class TorchLM(torch.nn.Module):
    """GPT-style LM from torch parts: embeddings + learned positions, pre-LN causal blocks with
    tanh-GELU, a final LayerNorm, and the output layer tied to the token embedding."""

    def __init__(self, vocab, d, heads, layers, d_ff, max_len):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Parameter(torch.randn(max_len, d) * 0.02)
        gelu = lambda x: torch.nn.functional.gelu(x, approximate="tanh")   # noqa: E731
        self.blocks = torch.nn.ModuleList(torch.nn.TransformerEncoderLayer(
            d, heads, d_ff, dropout=0.0, activation=gelu, batch_first=True, norm_first=True)
            for _ in range(layers))
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, ids):
        n = ids.shape[1]
        x = self.tok(ids) + self.pos[:n]
        for block in self.blocks:
            x = block(x, src_mask=torch_causal(n))
        return self.norm(x) @ self.tok.weight.T


def test_decoder_lm_loss_and_every_parameter_gradient(dtype):
    theirs = torch_module(TorchLM(11, 8, 2, 2, 16, 7), dtype)
    with torch.no_grad():
        for block in theirs.blocks:                  # non-trivial norms, so their grads matter
            for norm in (block.norm1, block.norm2):
                norm.weight.normal_()
                norm.bias.normal_()
    ours = models.DecoderLM(11, 8, 2, 2, 16, max_len=7, positional="learned", tie_weights=True)
    mapping = {"tok_emb.W": (theirs.tok.weight, None), "pos_emb.W": (theirs.pos, None),
               **norm_map("norm.", theirs.norm)}
    for i, block in enumerate(theirs.blocks):
        mapping.update({f"blocks.blocks.{i}.{k}": v for k, v in encoder_map(block).items()})
    copy_weights(ours, mapping)

    ids = backend.randint(0, 11, (3, 7))
    x, y = ids[:, :-1], ids[:, 1:]                    # teacher forcing
    loss, backward = ours.loss(x, y)
    backward()
    logits = theirs(torch.from_numpy(backend.to_numpy(x)))
    loss_torch = torch.nn.functional.cross_entropy(
        logits.reshape(-1, 11), torch.from_numpy(backend.to_numpy(y)).reshape(-1))
    loss_torch.backward()
    assert_close(np.array(loss), loss_torch, dtype, "loss")
    compare_gradients(ours, mapping, dtype)           # the tied table: both uses summed
