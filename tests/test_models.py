"""The four models: shapes, masks, tied and shared weights, and KV-cache decoding that gives the
same logits and tokens as recomputing everything."""
import re
import warnings

import numpy as np
import pytest

import minitf.functional as F
import minitf.nn as nn
from minitf import backend
from minitf.data import BOS
from minitf.generate import beam_search, generate, greedy_decode, sample_next
from minitf.models import (MODELS, DecoderLM, EncoderClassifier, EncoderLM, Model, RNNLM,
                           SetEncoder,
                           Transformer, VisionTransformer, build)
from minitf.models.lm import POSITIONAL


@pytest.mark.parametrize("positional", POSITIONAL)
def test_kv_cache_gives_the_logits_and_tokens_of_full_recomputation(float64, positional):
    model = DecoderLM(13, 16, 2, 2, max_len=10, positional=positional)
    prompt = backend.randint(0, 13, (2, 3))
    with backend.seed(7):
        cached, cached_logits = generate(model, prompt, 12, use_cache=True, return_logits=True)
    with backend.seed(7):
        full, full_logits = generate(model, prompt, 12, use_cache=False, return_logits=True)
    # 3 + 12 tokens > max_len = 10: the window slides, and the cache is rebuilt when full
    assert np.abs(cached_logits - full_logits).max() <= 1e-9
    assert (cached == full).all() and cached.shape == (2, 15)


@pytest.mark.parametrize("shaw_values", [True, False], ids=["keys and values", "keys only"])
def test_shaw_attention_with_a_kv_cache_matches_the_full_causal_forward(float64, shaw_values):
    """A prompt of 3 tokens, then one token at a time: each new query's offsets j − i are counted
    from the cache's length, so every step sees what the full causal forward saw -- also past
    2K + 1 = 5 tokens, where the far offsets share the clipped rows."""
    attention = nn.MultiHeadAttention(12, 3, d_head=5, d_v=6, causal=True, positional="shaw",
                                      max_relative=2, shaw_values=shaw_values)
    for table in (attention.table_k, attention.table_v):
        if table is not None:                   # tables as large as the keys: an error shows
            table.data = backend.randn(*table.shape)
    x = backend.randn(2, 11, 12)
    full = attention(x)
    cache = nn.KVCache()
    steps = [attention(x[:, :3], cache=cache)]
    steps += [attention(x[:, t:t + 1], cache=cache) for t in range(3, 11)]
    stepwise = backend.get_array_module(full).concatenate(steps, axis=1)     # (b, 11, d_model)
    assert cache.length == 11 and cache.v.shape == (2, 3, 11, 6)
    assert np.abs(backend.to_numpy(full) - backend.to_numpy(stepwise)).max() <= 1e-9


def test_a_rope_layer_moved_to_float64_turns_by_float64_angles(float64):
    """The layer keeps cos θ and sin θ from one call to the next. Run once in float32, then moved
    to float64, it must turn q and k by float64 angles, as a fresh float64 layer does: float32
    ones would be off by about 1e-8."""
    layer = nn.MultiHeadAttention(8, 2, causal=True, positional="rope")
    x = backend.randn(2, 5, 8)
    layer.to(dtype="float32")(x.astype("float32"))      # the angles of 5 positions, in float32
    layer.to(dtype="float64")
    fresh = nn.MultiHeadAttention(8, 2, causal=True, positional="rope")
    fresh.load_state_dict(layer.state_dict())
    assert np.abs(backend.to_numpy(layer(x) - fresh(x))).max() <= 1e-12


def test_the_decoders_kv_cache_matches_full_recomputation(float64):
    model = Transformer(12, 12, 16, 2, 2, dropout=0.0)
    src = backend.to_device(np.array([[3, 4, 5, 6], [7, 8, 0, 0]]))
    memory, memory_mask = model.encode(src)
    tgt = backend.to_device(np.array([[BOS, 5, 9, 4, 3], [BOS, 8, 7, 3, 3]]))
    full = model.decode(tgt, memory, memory_mask)
    cache = model.new_cache()
    steps = [model.decode(tgt[:, t:t + 1], memory, memory_mask, cache) for t in range(5)]
    stepwise = backend.get_array_module(full).concatenate(steps, axis=1)     # (b, 5, V)
    assert np.abs(backend.to_numpy(full) - backend.to_numpy(stepwise)).max() <= 1e-9
    assert greedy_decode(model, src, 6) == greedy_decode(model, src, 6, use_cache=False)


def test_decoding_with_and_without_the_cache_agrees_when_a_token_equals_the_pad_id(float64):
    """A generated token is never padding, even one equal to pad_id: the uncached decoder, which
    reruns the whole output, must not mask it (the cached one never does)."""
    backend.seed(2)
    model = Transformer(12, 12, 16, 2, 2, dropout=0.0)          # pad_id = 0
    model.out.b.data[0] = 2.0                                   # make the pad id a likely output
    src = backend.randint(3, 12, (3, 5))
    cached, cached_logits = greedy_decode(model, src, 8, return_logits=True)
    full, full_logits = greedy_decode(model, src, 8, use_cache=False, return_logits=True)
    assert any(0 in tokens[:-1] for tokens in cached)           # pads with tokens after them
    assert full == cached
    assert np.abs(full_logits - cached_logits).max() <= 1e-9


def test_beam_search_of_width_one_is_greedy(float64):
    model = Transformer(12, 12, 16, 2, 2)
    src = backend.randint(3, 12, (3, 5))
    assert beam_search(model, src, beam_size=1, max_len=6, alpha=0.0) == \
        greedy_decode(model, src, max_len=6)


def test_decoding_leaves_every_module_in_the_mode_it_was_in():
    """generate, greedy_decode and beam_search switched the model to eval mode and left it
    there: a training loop that printed a sample between steps went on without dropout."""
    lm = DecoderLM(5, 8, 2, 1, max_len=6, dropout=0.1)
    translator = Transformer(12, 12, 16, 2, 2, dropout=0.1)
    src = backend.randint(3, 12, (1, 4))
    for model, decode in [(lm, lambda: generate(lm, backend.randint(0, 5, (3,)), 2)),
                          (translator, lambda: greedy_decode(translator, src, max_len=3)),
                          (translator, lambda: beam_search(translator, src, 2, max_len=3))]:
        *others, last = model.train().modules()
        last.training = False                     # a module in a mode of its own stays in it
        decode()
        assert all(m.training for m in others) and last.training is False
        model.eval()
        decode()
        assert not any(m.training for m in model.modules())


def test_a_long_prompt_is_cropped_with_a_warning():
    model = DecoderLM(5, 8, 2, 1, max_len=6)
    with pytest.warns(UserWarning, match="only its last 6 tokens are used"):
        ids = generate(model, backend.randint(0, 5, (9,)), 3, greedy=True)
    assert ids.shape == (1, 12)


@pytest.fixture
def seeded():
    """Draws from a seed of their own, not from whatever state the tests before left."""
    with backend.seed(0):
        yield


def test_sampling_rules(seeded):
    logits = backend.to_device(np.log(np.array([[0.5, 0.3, 0.15, 0.05]] * 2000)))
    assert set(backend.to_numpy(sample_next(logits, greedy=True))) == {0}
    assert set(backend.to_numpy(sample_next(logits, top_k=2))) == {0, 1}
    assert set(backend.to_numpy(sample_next(logits, top_p=0.7))) == {0, 1}   # 0.5 < 0.7 ≤ 0.8
    # a p that is 0 in float32 kept no token: 0/0 (a warning), then token 0 every time
    likely_2 = backend.to_device(np.log(np.array([[0.1, 0.2, 0.6, 0.1]] * 50, np.float32)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert set(backend.to_numpy(sample_next(likely_2, top_p=1e-46))) == {2}
        # τ → 0 is greedy: logits / 1e-30 overflowed to −∞ everywhere (NaN in softmax), and a τ
        # that is 0 in float32 divided by 0; both gave token 0
        for tau in (1e-30, 1e-40, 1e-300):
            assert set(backend.to_numpy(sample_next(likely_2 * 1000, temperature=tau))) == {2}
    counts = np.bincount(backend.to_numpy(sample_next(logits)), minlength=4) / 2000
    assert np.abs(counts - [0.5, 0.3, 0.15, 0.05]).max() < 0.05
    cold = np.bincount(backend.to_numpy(sample_next(logits, temperature=0.1)), minlength=4)
    assert cold[0] > 1960                   # p1/p0 = 0.6^10 ≈ 0.006
    # τ = 2 flattens: p ∝ p^(1/2), [0.5, 0.3, 0.15, 0.05] → [0.40, 0.31, 0.22, 0.13] (a τ taken
    # as min(τ, 1) left it at τ = 1, and only lesson 12 saw it)
    hot = np.bincount(backend.to_numpy(sample_next(logits, temperature=2.0)), minlength=4) / 2000
    flat = np.sqrt([0.5, 0.3, 0.15, 0.05]) / np.sqrt([0.5, 0.3, 0.15, 0.05]).sum()
    assert np.abs(hot - flat).max() < 0.04 and np.abs(counts - flat).max() > 0.08
    with pytest.raises(ValueError, match="temperature"):
        sample_next(logits, temperature=0)


def test_backward_after_a_cached_forward_is_refused():
    model = DecoderLM(5, 8, 2, 1, max_len=6)
    logits = model(backend.randint(0, 5, (1, 2)), cache=model.new_cache())
    with pytest.raises(RuntimeError, match="KVCache, which is for generation only"):
        model.backward(backend.get_array_module(logits).ones_like(logits))


def test_tied_and_shared_weights_are_one_parameter():
    tied, untied = DecoderLM(20, 8, 2, 1, max_len=4), DecoderLM(20, 8, 2, 1, max_len=4,
                                                                 tie_weights=False)
    assert untied.num_parameters() - tied.num_parameters() == 20 * 8
    shared = Transformer(9, 9, 8, 2, 1, share_embeddings=True)
    names = [name for name, _ in shared.named_parameters()]
    assert "src_emb.W" in names and "tgt_emb.W" not in names
    assert shared.tgt_emb.W is shared.src_emb.W
    with pytest.raises(ValueError, match="one vocabulary"):
        Transformer(9, 8, share_embeddings=True)


def test_padding_does_not_change_a_classification():
    model = EncoderClassifier(10, 2, 16, 2, 2, max_len=8, pad_id=0)
    ids = backend.to_device(np.array([[4, 5, 6, 0, 0, 0]]))
    logits = model(ids)
    assert np.allclose(backend.to_numpy(logits), backend.to_numpy(model(ids[:, :3])), atol=1e-5)


def test_the_vision_transformer_cuts_patches_row_by_row():
    images = backend.to_device(np.arange(2 * 1 * 4 * 4, dtype="float32").reshape(2, 1, 4, 4))
    tokens, _ = F.patches(images, 2)
    assert tokens.shape == (2, 4, 4)
    assert backend.to_numpy(tokens[0, 1]).tolist() == [2, 3, 6, 7]   # top-right patch
    model = VisionTransformer(4, 2, 3, d_model=8, n_heads=2, n_layers=1)
    assert model(images).shape == (2, 3)
    with pytest.raises(ValueError, match="images"):
        model(images[:, :, :3])


def test_nan_or_inf_in_the_memory_is_refused_at_the_decoder():
    """decode is public: its float input, the memory, is checked like a ViT's images."""
    model = Transformer(7, 6, 8, 2, 1)
    memory, memory_mask = model.encode(backend.randint(3, 7, (1, 3)))
    memory[0, 1, 0] = np.inf
    with pytest.raises(ValueError, match=r"Transformer: memory holds 1 NaN or infinite"):
        model.decode(backend.to_device(np.array([[1, 4]])), memory, memory_mask)


@pytest.mark.parametrize("block", [nn.EncoderBlock, nn.DecoderBlock])
def test_blocks_pass_eps_to_every_layer_norm_and_bias_to_every_projection(block):
    default, bert = block(8, 2, 16), block(8, 2, 16, eps=1e-12, bias=False)
    norms = [m for m in bert.modules() if isinstance(m, nn.LayerNorm)]
    assert len(norms) == (2 if block is nn.EncoderBlock else 3)
    assert {m.eps for m in norms} == {1e-12}
    assert {m.eps for m in default.modules() if isinstance(m, nn.LayerNorm)} == {1e-5}
    linears = [m for m in bert.modules() if isinstance(m, nn.Linear)]
    assert linears and all(m.b is None for m in linears)      # attention and feed-forward
    names = {name for name, _ in bert.named_parameters()}
    assert not {n for n in names if n.endswith(".b")} and {n for n in names if n.endswith(".beta")}


def test_a_decoder_lm_without_the_causal_mask_lets_a_position_see_the_next_token(float64):
    ids = backend.randint(0, 9, (1, 5))
    changed = ids.copy()
    changed[0, 4] = (ids[0, 4] + 1) % 9                          # only the last token differs
    for causal in (True, False):
        model = DecoderLM(9, 8, 2, 2, max_len=5, causal=causal)
        moved = backend.to_numpy(model(changed)[:, :4]) - backend.to_numpy(model(ids)[:, :4])
        assert np.any(moved != 0) != causal, f"causal={causal}: positions 0-3 saw token 4"


def test_a_post_ln_decoder_lm_has_no_final_norm():
    post, pre = DecoderLM(7, 8, 2, 1, max_len=4, pre_ln=False), DecoderLM(7, 8, 2, 1, max_len=4)
    assert post.norm is None and not post.blocks.blocks[0].ffn.pre_ln
    assert pre.num_parameters() - post.num_parameters() == 2 * 8          # γ and β of the norm


def test_every_model_rebuilds_from_its_config():
    made = [DecoderLM(7, 8, 2, 1, max_len=4), DecoderLM(7, 8, 2, 1, max_len=4, causal=False,
                                                        pre_ln=False), Transformer(7, 6, 8, 2, 1),
            EncoderClassifier(7, 2, 8, 2, 1), EncoderClassifier(7, 2, 8, 2, 1, n_segments=2),
            VisionTransformer(4, 2, 3, d_model=8, n_heads=2),
            EncoderLM(7, 8, 2, 1, max_len=4, n_segments=2), SetEncoder(3, 2, 8, 2, 1),
            SetEncoder(3, 2, 8, 2, 1, pooling="mean", max_len=5),
            RNNLM(7, 8), RNNLM(7, 8, 5, cell="lstm")]
    assert {m.kind for m in made} == set(MODELS)
    assert all(isinstance(m, Model) for m in made)
    for model in made:
        again = build(model.kind, model.config)
        assert again.config == model.config
        assert again.num_parameters() == model.num_parameters()
        again.load_state_dict(model.state_dict())


def test_bad_input_names_the_argument():
    model = DecoderLM(7, 8, 2, 1, max_len=4)
    with pytest.raises(ValueError, match="ids.*vocab_size=7"):
        model(backend.to_device(np.array([[1, 9]])))
    with pytest.raises(ValueError, match="exceed the context.*max_len=4"):
        model(backend.randint(0, 7, (1, 5)))
    cache = model.new_cache()
    model(backend.randint(0, 7, (1, 4)), cache=cache)
    with pytest.raises(ValueError, match=re.escape(       # cropping a new token changes nothing
            "the cache holds 4 tokens, ids 1 more: positions 4..4 exceed the context; wanted at "
            "most max_len=4 tokens (start a new_cache() and feed it the last 4 tokens or fewer")):
        model(backend.randint(0, 7, (1, 1)), cache=cache)
    rnn = RNNLM(7, 8)
    state = rnn.new_cache()
    rnn(backend.randint(0, 7, (1, 3)), cache=state)
    with pytest.raises(ValueError, match=re.escape(
            "RNNLM: cache holds the state of 1 sequence; ids has 2 rows; wanted new_cache()")):
        rnn(backend.randint(0, 7, (2, 1)), cache=state)
    # another model's state: NumPy's matmul error, and an LSTM that restarted its cell from 0
    for other, this in ((RNNLM(7, 8, d_hidden=16), "an RNN of d_hidden=16"),
                        (RNNLM(7, 8, cell="lstm"), "an LSTM of d_hidden=8")):
        with pytest.raises(ValueError, match=re.escape(
                f"RNNLM: cache holds an RNN's state of width 8; this model is {this}; wanted "
                f"this model's new_cache()")):
            other(backend.randint(0, 7, (1, 1)), cache=state)
    with pytest.raises(ValueError, match="positional must be one of"):
        DecoderLM(7, positional="absolute")
    with pytest.raises(ValueError, match="tgt"):
        Transformer(7, 6)(backend.randint(0, 7, (1, 3)), backend.to_device(np.array([[1, 6]])))
