"""Module and Parameter: naming, gradients that accumulate, modes, state dicts."""
import numpy as np
import pytest

import minitf.functional as F
import minitf.nn as nn
from minitf import array_ops, backend


def test_parameter_names_follow_the_tree():
    block = nn.DecoderBlock(8, 2, 16)
    names = [name for name, _ in block.named_parameters()]
    assert names[:4] == ["self_attn.layer.W_qkv.W", "self_attn.layer.W_qkv.b",
                         "self_attn.layer.W_o.W", "self_attn.layer.W_o.b"]
    assert "cross_attn.layer.W_q.W" in names and "cross_attn.layer.W_kv.W" in names
    assert "ffn.layer.W_1.W" in names and "ffn.norm.gamma" in names
    assert len(names) == len(set(names)) == len(block.parameters())


def test_lists_of_modules_are_walked():
    class Stack(nn.Module):
        def __init__(self):
            self.layers = [nn.Linear(3, 3), nn.Linear(3, 2)]

    assert [n for n, _ in Stack().named_parameters()] == ["layers.0.W", "layers.0.b",
                                                          "layers.1.W", "layers.1.b"]


def test_gradients_accumulate_until_zero_grad(backend_name):
    layer = nn.Linear(4, 3)
    x, dy = backend.randn(2, 4), backend.randn(2, 3)
    layer(x)
    layer.backward(dy)
    once = backend.to_numpy(layer.W.grad).copy()
    layer(x)
    layer.backward(dy)
    np.testing.assert_allclose(backend.to_numpy(layer.W.grad), 2 * once, rtol=1e-6)
    layer.zero_grad()
    assert not np.any(backend.to_numpy(layer.W.grad))


def test_train_and_eval_reach_every_module(backend_name):
    block = nn.EncoderBlock(8, 2, 16, dropout=0.5)
    x = backend.randn(2, 4, 8)
    block.eval()
    assert all(not m.training for m in block.modules())
    np.testing.assert_array_equal(backend.to_numpy(block(x)), backend.to_numpy(block(x)))
    block.train()
    assert all(m.training for m in block.modules())
    assert not np.allclose(backend.to_numpy(block(x)), backend.to_numpy(block(x)))


def test_state_dict_round_trip(backend_name):
    with backend.seed(1):
        source = nn.EncoderBlock(8, 2, 16, positional="relative")
    with backend.seed(2):
        target = nn.EncoderBlock(8, 2, 16, positional="relative")
    state = source.state_dict()
    assert all(isinstance(a, np.ndarray) for a in state.values())
    target.load_state_dict(state)
    x = backend.randn(2, 5, 8)
    np.testing.assert_array_equal(backend.to_numpy(target(x)), backend.to_numpy(source(x)))
    state[next(iter(state))][...] = 0                  # the copy is independent of the model
    assert np.any(backend.to_numpy(source.parameters()[0].data))


def test_load_state_dict_lists_every_mismatch():
    layer = nn.Linear(3, 2)
    with pytest.raises(ValueError) as error:
        layer.load_state_dict({"W": np.zeros((2, 3)), "c": np.zeros(1)})
    message = str(error.value)
    assert "missing b (2,)" in message
    assert "unexpected c (1,)" in message
    assert "W: saved (2, 3), model (3, 2)" in message


def test_load_state_dict_casts_to_the_parameter_dtype():
    layer = nn.Linear(3, 2)
    layer.load_state_dict({"W": np.ones((3, 2)), "b": np.ones(2)})      # float64 arrays
    assert layer.W.data.dtype == np.float32


def test_attention_weights_are_kept_for_plotting(backend_name):
    attention = nn.MultiHeadAttention(8, 2, causal=True)
    attention(backend.randn(3, 5, 8))
    probs = backend.to_numpy(attention.probs)
    assert probs.shape == (3, 2, 5, 5)
    np.testing.assert_allclose(probs.sum(-1), 1, rtol=1e-5)
    assert np.all(np.triu(probs, k=1) == 0)


def _hidden_arrays_kept(ffn, hidden_shape):
    """The distinct (..., d_ff) arrays the FFN's layers keep for the backward."""
    kept = {}
    for layer in (ffn.W_1, ffn.act, ffn.drop, ffn.W_2):
        cache = layer._cache if isinstance(layer._cache, tuple) else (layer._cache,)
        kept.update({id(a): a for a in cache if getattr(a, "shape", None) == hidden_shape})
    return len(kept)


@pytest.mark.parametrize("activation, dropout, kept", [("gelu", 0.0, 2), ("gelu", 0.5, 4),
                                                        ("relu", 0.0, 2)])
def test_feed_forward_keeps_no_copy_of_a_hidden_layer_it_can_rebuild(backend_name, activation,
                                                                     dropout, kept):
    """A GELU keeps x and Φ(x); its output x Φ(x), W_2's input, is rebuilt, not kept a third time.
    With dropout, W_2's input is x Φ(x) masked and is kept beside the mask; ReLU keeps a mask and
    W_2 its input."""
    ffn = nn.FeedForward(8, 32, activation=activation, dropout=dropout)
    x, dy = backend.randn(3, 5, 8), backend.randn(3, 5, 8)
    backend.seed(1)
    ffn(x)
    assert _hidden_arrays_kept(ffn, (3, 5, 32)) == kept
    grads = [backend.to_numpy(g).copy() for g in
             [ffn.backward(dy)] + [p.grad for p in ffn.parameters()]]
    ffn.zero_grad()                                    # the same bits as the plain chain gives
    backend.seed(1)
    ffn.W_2(ffn.drop(ffn.act(ffn.W_1(x))))
    plain = [ffn.W_1.backward(ffn.act.backward(ffn.drop.backward(ffn.W_2.backward(dy))))]
    for ours, theirs in zip(grads, plain + [p.grad for p in ffn.parameters()], strict=True):
        np.testing.assert_array_equal(ours, backend.to_numpy(theirs))


def _owner(a):
    """The array that holds a's memory: a itself, or the array a is a view of."""
    while a.base is not None:
        a = a.base
    return a


@pytest.mark.parametrize("positional", [None, "rope"])
def test_attention_keeps_q_k_and_v_and_nothing_around_them(backend_name, positional):
    """What the backward keeps of the projections is q, k and v themselves. Unturned, they are
    the three thirds of W_qkv's output; turned by RoPE, q and k are new arrays, and v must not
    keep the rest of that output (the old q and k) alive."""
    attention = nn.MultiHeadAttention(8, 2, causal=True, positional=positional)
    attention(backend.randn(3, 5, 8))
    q, k, v = attention._cache[0][:3]
    held = {id(_owner(a)): _owner(a).nbytes for a in (q, k, v)}
    assert sum(held.values()) == q.nbytes + k.nbytes + v.nbytes


def test_a_rope_layer_turns_q_and_k_by_the_angles_of_base_10000(backend_name):
    """No model sets rope_base, and no config keeps it: the layer's default is every RoPE
    model's angles (minitf train's, and each saved checkpoint's). 1000 passed every test."""
    with backend.precision("float64"):
        attention = nn.MultiHeadAttention(8, 2, causal=True, positional="rope")
        x = backend.randn(2, 5, 8)
        attention(x)
        q_turned, k_turned = attention._cache[0][:2]
        q, k, _ = attention._project(x, None, None)                 # (2, 2, 5, 4) each
        cos, sin = F.rope_angles(5, 4)                               # θ = p / 10000^(2i/d_head)
        for turned, plain in ((q_turned, q), (k_turned, k)):
            np.testing.assert_allclose(backend.to_numpy(turned),
                                       backend.to_numpy(F.rope(plain, cos, sin)[0]), atol=1e-12)


def test_free_head_sizes_set_the_projection_widths(backend_name):
    """d_head and d_v chosen freely (10 is not divisible by 3: fine once d_head is given)."""
    attention = nn.MultiHeadAttention(10, 3, d_head=4, d_v=6)
    shapes = {name: tuple(p.shape) for name, p in attention.named_parameters()}
    assert shapes["W_qkv.W"] == (10, 3 * (4 + 4 + 6)) and shapes["W_o.W"] == (3 * 6, 10)
    assert attention(backend.randn(2, 5, 10)).shape == (2, 5, 10)
    assert attention.probs.shape == (2, 3, 5, 5)
    block = nn.DecoderBlock(8, 2, 16, d_head=8, d_v=3)            # full-width heads
    names = {name: tuple(p.shape) for name, p in block.named_parameters()}
    assert names["self_attn.layer.W_qkv.W"] == (8, 2 * (8 + 8 + 3))
    assert names["cross_attn.layer.W_q.W"] == (8, 16)
    assert names["cross_attn.layer.W_kv.W"] == (8, 2 * (8 + 3))
    assert names["cross_attn.layer.W_o.W"] == (6, 8)
    assert nn.EncoderBlock(8, 2, 16, d_v=5).self_attn.layer.W_o.W.shape == (10, 8)


def test_shaw_tables_are_shared_by_the_heads(backend_name):
    shaw = nn.MultiHeadAttention(8, 2, d_v=3, positional="shaw", max_relative=4)
    shapes = {name: tuple(p.shape) for name, p in shaw.named_parameters()}
    assert shapes["table_k"] == (9, 4) and shapes["table_v"] == (9, 3)
    keys_only = nn.MultiHeadAttention(8, 2, positional="shaw", shaw_values=False)
    assert "table_v" not in dict(keys_only.named_parameters())


def test_float32_stays_float32(backend_name):
    """No silent upcast anywhere on the forward or the backward path."""
    block = nn.DecoderBlock(8, 2, 16, positional="alibi", activation="gelu", dropout=0.1)
    x, memory = backend.randn(2, 3, 8), backend.randn(2, 4, 8)
    y = block(x, memory)
    dx, dmemory = block.backward(backend.randn(*y.shape))
    assert {y.dtype, dx.dtype, dmemory.dtype} == {np.dtype("float32")}
    assert {p.grad.dtype for p in block.parameters()} == {np.dtype("float32")}


def test_layer_checks_are_skipped_inside_a_model_only():
    """A layer's input checks run when you call it, and are skipped while a model runs it (the
    model checked its own input); a model that fails half-way leaves the layers checking again."""
    from minitf.validate import inside_a_model, nesting

    class Probe(nn.Module):
        seen = []

        def forward(self, x):
            self.seen.append(inside_a_model())
            if x.shape[-1] != 4:
                raise ValueError("probe: wanted 4 features")
            return x

    class Model(nn.Module):
        is_model = True

        def __init__(self):
            self.probe, self.linear = Probe(), nn.Linear(4, 4)

        def forward(self, x):
            return self.linear(self.probe(x))

    class Block(nn.Module):                       # a layer made of layers: not a model
        def __init__(self):
            self.probe = Probe()

        def forward(self, x):
            return self.probe(x)

    model, x = Model(), backend.randn(2, 4)
    model(x)
    model.probe(x)
    Block()(x)
    assert Probe.seen == [True, False, False]
    with pytest.raises(ValueError, match="probe"):
        model(backend.randn(2, 3))
    assert not inside_a_model()
    with pytest.raises(ValueError, match="x has shape"):
        model.linear(backend.randn(2, 3))           # checked again: the failed model let go

    model(x)
    assert model._output == ((2, 4), x.dtype)                  # a model records its output...
    unrecorded = nn.module._UNRECORDED                         # ...its layers do not
    assert model.probe._output is unrecorded and model.linear._output is unrecorded
    model.linear(x)
    assert model.linear._output == ((2, 4), x.dtype)           # ...unless called on their own

    class Deep(Model):                              # the probe two levels down, inside a block
        def __init__(self):
            self.block, self.linear = Block(), nn.Linear(4, 4)

        def forward(self, x):
            return self.linear(self.block(x))

    Probe.seen.clear()
    deep = Deep()
    deep.block.probe(x)
    deep(x)
    assert deep.block.probe._output is unrecorded              # run by the model this time
    with pytest.raises(ValueError, match="probe"):
        Deep()(backend.randn(2, 3))
    assert Probe.seen == [False, True, True] and nesting.state == (0, 0)   # all levels left


def test_a_model_in_an_already_checked_block_skips_its_checks_and_nothing_else_does():
    from minitf.models import DecoderLM
    from minitf.validate import already_checked, inside_a_model, nesting
    model, bad = DecoderLM(5, 8, 2, 1, max_len=4), backend.to_device(np.array([[1, 9]]))
    with pytest.raises(ValueError, match="ids must lie in"):
        model(bad)                                        # checked as ever outside the block
    with pytest.raises(RuntimeError, match="stop"), already_checked():
        model(backend.to_device(np.array([[1, 2]])))
        assert model._output is nn.module._UNRECORDED     # like a layer, it records nothing
        with pytest.raises(ValueError) as unchecked:      # a module here checks no input:
            nn.Linear(4, 3)(backend.randn(2, 5))
        assert "Linear" not in str(unchecked.value)       # the matrix library's error, not ours
        raise RuntimeError("stop")
    assert nesting.state == (0, 0) and not inside_a_model()
    with pytest.raises(ValueError, match="ids must lie in"):
        model(bad)                                        # the block let go, error or not


def test_a_module_called_is_its_forward_unless_it_defines_its_own_call():
    class Double(nn.Module):
        def forward(self, x):
            return 2 * x

    class Loud(Double):
        def __call__(self, x):
            return "called"

        def forward(self, x):
            return 3 * x

    x, double = backend.randn(2, 3), Double()
    np.testing.assert_array_equal(backend.to_numpy(double(x)), 2 * backend.to_numpy(x))
    assert double._output == (x.shape, x.dtype)      # the call went through the forward's wrapper
    class Louder(Loud):                               # inherits Loud's own __call__
        def forward(self, x):
            return 4 * x

    assert Loud()(x) == "called" and Louder()(x) == "called"
    np.testing.assert_array_equal(backend.to_numpy(Loud().forward(x)), 3 * backend.to_numpy(x))


def test_causal_self_attention_runs_in_blocks_of_queries(float64):
    """Past CAUSAL_BLOCK queries, a causal MultiHeadAttention computes the weights a block at a
    time (on NumPy; on a GPU in one block, see array_ops.blocks_pay_off); its output, weights and
    gradients are those of F.attention with the whole causal mask (forced here by an all-True
    mask)."""
    n = 2 * F.CAUSAL_BLOCK + 1                                     # three blocks, the last of 1
    blocked, whole = (nn.MultiHeadAttention(4, 2, causal=True) for _ in range(2))
    whole.load_state_dict(blocked.state_dict())
    x, dy = backend.randn(1, n, 4), backend.randn(1, n, 4)
    everywhere = backend.get_array_module(x).ones((n, n), dtype=bool)
    y, y_whole = blocked(x), whole(x, mask=everywhere)
    blocks = 3 if array_ops.blocks_pay_off(x) else 1
    assert len(blocked._cache[0].blocks) == blocks and whole._cache[0].probs.shape == (1, 2, n, n)
    np.testing.assert_allclose(backend.to_numpy(y), backend.to_numpy(y_whole), rtol=1e-12)
    np.testing.assert_allclose(backend.to_numpy(blocked.probs), backend.to_numpy(whole.probs),
                               rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(backend.to_numpy(blocked.backward(dy)),
                               backend.to_numpy(whole.backward(dy)), rtol=1e-10)
    for (name, p), q in zip(blocked.named_parameters(), whole.parameters()):
        wanted = backend.to_numpy(q.grad)     # the key bias's is 0 up to rounding: softmax is
        np.testing.assert_allclose(backend.to_numpy(p.grad), wanted,      # blind to a row shift
                                   rtol=1e-10, atol=1e-12 * np.abs(wanted).max(), err_msg=name)


def test_the_module_docstring_s_own_layer_passes_its_gradient_check(float64):
    """The example a student copies to write a layer must itself be right."""
    import textwrap

    from minitf.gradcheck import ModuleCase, check
    from minitf.nn import module, parameter

    doc = module.Module.__doc__
    code = textwrap.dedent(doc.split("For example, one learned scale::\n", 1)[1].split("\n\n    ``")[0])
    namespace = {**vars(module), **vars(parameter)}        # Module, and ones
    exec(code, namespace)
    rows = check("Scale", ModuleCase(namespace["Scale"](), {"x": backend.randn(2, 3)}))
    assert [r.tensor for r in rows] == ["input x", "param a"] and all(r.passed for r in rows)


def test_a_layer_whose_forward_saves_nothing_is_told_so_not_that_no_forward_ran(backend_name):
    """The docstring's Scale with its self._save(x) left out: the error said no forward() had
    run since the last backward(), though one had."""
    class Scale(nn.Module):
        def __init__(self):
            self.a = nn.parameter.ones(1)

        def forward(self, x):
            return self.a.data * x

        def backward(self, dy):
            x = self._pop_cache()
            return dy * x

    scale, x = Scale(), backend.randn(3)
    scale(x)
    with pytest.raises(RuntimeError, match=r"^Scale.backward\(\): its forward ran but kept "
                       r"nothing for it with self._save\(...\)"):
        scale.backward(x)
    with pytest.raises(RuntimeError, match=r"^Scale.backward\(\) was called with no forward"):
        Scale().backward(x)


@pytest.mark.parametrize("causal", [False, True])
def test_t5_bias_tells_the_future_from_the_past_only_without_a_causal_mask(causal):
    """An encoder's keys lie on both sides of a query: its T5 buckets are bidirectional, so a
    key one step ahead and one step behind get different biases. A causal layer never sees
    a later key, and spends no bucket on one: ahead is bucket 0, like the query itself."""
    layer = nn.MultiHeadAttention(8, 2, positional="relative", causal=causal)
    bias = backend.to_numpy(layer.relative_bias(3, 3))                # (h, n_q, n_k)
    ahead, behind, itself = bias[:, 1, 2], bias[:, 1, 0], bias[:, 1, 1]
    if causal:
        assert np.array_equal(ahead, itself) and not np.array_equal(behind, itself)
    else:
        assert not np.array_equal(ahead, behind) and not np.array_equal(ahead, itself)
