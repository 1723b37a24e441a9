"""Edges of the models' pieces: BERT's masking labels the positions it did not choose with
ignore_index (-100) and the loss skips them, MeanPool of a row of padding only is 0 with a 0
gradient, two queries on attention's general path see no later key, and a sampled id never
falls past the vocabulary when float rounding leaves the CDF short of 1."""
import math
import warnings

import numpy as np
import pytest

import minitf.functional as F
from minitf import backend, data, generate as generation, nn
from minitf.generate import generate, sample_next
from minitf.models import DecoderLM, EncoderLM

PAD, MASK, CLS, SEP = 0, 1, 2, 3
SPECIAL = (PAD, CLS, SEP)


def _batch(b=4, n=12, vocab=20, seed=0):
    ids = np.random.default_rng(seed).integers(4, vocab, (b, n))
    ids[:, 0], ids[:, -1], ids[1, 8:] = CLS, SEP, PAD
    return ids


# -- mask_tokens: ignore_index where nothing was chosen, and the loss ignores it -------------------

def test_mask_tokens_labels_every_unchosen_position_minus_100():
    """Unchosen positions (specials too) get -100; another ignore_index marks the same ones."""
    ids = _batch()
    inputs, targets = (backend.to_numpy(a) for a in data.mask_tokens(
        backend.to_device(ids), MASK, 20, p=0.5, special_ids=SPECIAL, seed=1))
    assert targets.dtype == np.int64
    unchosen = targets == -100
    assert 0 < unchosen.sum() < unchosen.size
    assert (targets[~unchosen] == ids[~unchosen]).all()
    assert unchosen[np.isin(ids, SPECIAL)].all()                # specials are never scored
    for other in (-1, PAD):                                     # negative, or a special id
        _, again = data.mask_tokens(backend.to_device(ids), MASK, 20, p=0.5,
                                    special_ids=SPECIAL, ignore_index=other, seed=1)
        again = backend.to_numpy(again)
        np.testing.assert_array_equal(np.where(unchosen, other, targets), again)
    with pytest.raises(ValueError, match="ignore_index must be an integer that no scored token"):
        data.mask_tokens(ids, MASK, 20, special_ids=SPECIAL, ignore_index=7)   # an ordinary id


def test_the_masked_lm_loss_is_the_mean_over_the_chosen_positions_only(float64):
    """EncoderLM.loss is −log p averaged over chosen positions only; unchosen get no gradient."""
    ids = _batch()
    inputs, targets = data.mask_tokens(backend.to_device(ids), MASK, 20, p=0.5,
                                       special_ids=SPECIAL, seed=1)
    model = EncoderLM(20, d_model=8, n_heads=2, n_layers=1, max_len=12)
    model.eval()
    logits = backend.to_numpy(model(inputs)).astype(np.float64)
    loss, _ = model.loss(inputs, targets)
    t = backend.to_numpy(targets)
    chosen = t != -100
    z = logits - logits.max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    by_hand = -logp[chosen, t[chosen]].mean()
    assert loss == pytest.approx(by_hand, rel=1e-12, abs=1e-12)
    every = np.take_along_axis(logp, ids[..., None], axis=-1).mean()      # every position's
    assert loss != pytest.approx(-every)                       # is not the loss: the chosen are
    _, cache = F.cross_entropy(backend.to_device(logits), targets)
    dlogits = backend.to_numpy(F.cross_entropy_backward(1.0, cache))
    assert np.all(dlogits[~chosen] == 0) and np.abs(dlogits[chosen]).sum() > 0


# -- MeanPool of a row that is all padding ---------------------------------------------------------

def test_mean_pool_of_a_row_of_padding_only_is_zero_and_so_is_its_gradient(float64):
    """An all-padding row pools to 0 with a 0 gradient (0/0 made NaN); other rows average."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 4, 5))
    keep = np.array([[True, True, False, False], [False] * 4, [True] * 4,
                     [False, False, True, False]])
    pool = nn.MeanPool()
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # no "invalid value in divide" either
        s = backend.to_numpy(pool(backend.to_device(x), backend.to_device(keep)))
        ds = rng.standard_normal((4, 5))
        dx = backend.to_numpy(pool.backward(backend.to_device(ds)))
    assert np.isfinite(s).all() and np.isfinite(dx).all()
    np.testing.assert_array_equal(s[1], np.zeros(5))
    np.testing.assert_array_equal(dx[1], np.zeros((4, 5)))
    np.testing.assert_allclose(s[0], x[0, :2].mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(s[2], x[2].mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(dx[0, :2], np.stack([ds[0] / 2] * 2), rtol=1e-12)
    np.testing.assert_array_equal(dx[0, 2:], np.zeros((2, 5)))
    np.testing.assert_allclose(dx[2], np.stack([ds[2] / 4] * 4), rtol=1e-12)
    np.testing.assert_array_equal(s[3], x[3, 2])                    # one real token: itself
    np.testing.assert_array_equal(dx[3, 2], ds[3])


# -- the causal mask with two queries, off the causal_attention fast path --------------------------

def _by_hand(mha, x, visible):
    """Multi-head attention computed directly: x (b, n, d), visible (n_q, n_k) booleans."""
    b, n, d = x.shape
    h, dh = mha.n_heads, mha.d_head
    y = x @ backend.to_numpy(mha.W_qkv.W.data) + backend.to_numpy(mha.W_qkv.b.data)
    q, k, v = (y[..., i * d:(i + 1) * d].reshape(b, n, h, dh).transpose(0, 2, 1, 3)
               for i in range(3))
    q = q[:, :, -visible.shape[0]:]                             # the last n_q are the queries
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh) + np.where(visible, 0.0, -np.inf)
    probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(b, visible.shape[0], d)
    return context @ backend.to_numpy(mha.W_o.W.data) + backend.to_numpy(mha.W_o.b.data)


def test_two_queries_on_the_general_attention_path_are_masked_causally(float64):
    """n_q = 2 off causal_attention (mask given, or after a KV cache) is still causally masked."""
    mha = nn.MultiHeadAttention(8, 2, causal=True)
    x = np.random.default_rng(1).standard_normal((2, 5, 8))
    tril = np.tril(np.ones((5, 5), dtype=bool))
    # uncached, two tokens, every key kept by a padding mask: attention with a mask, not
    # causal_attention
    keep = backend.to_device(np.ones((2, 1, 1, 2), dtype=bool))
    out = backend.to_numpy(mha(backend.to_device(x[:, :2]), mask=keep))
    np.testing.assert_allclose(out, _by_hand(mha, x[:, :2], tril[:2, :2]), rtol=1e-10,
                               atol=1e-12)
    assert backend.to_numpy(mha.probs)[..., 0, 1].max() == 0.0
    # three tokens cached, then two at once: queries at positions 3 and 4 over keys 0 … 4
    cache = nn.KVCache()
    mha(backend.to_device(x[:, :3]), cache=cache)
    out = backend.to_numpy(mha(backend.to_device(x[:, 3:]), cache=cache))
    np.testing.assert_allclose(out, _by_hand(mha, x, tril[3:]), rtol=1e-10, atol=1e-12)
    full = backend.to_numpy(mha(backend.to_device(x)))          # the fast path, all five
    np.testing.assert_allclose(out, full[:, 3:], rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(backend.to_numpy(F.causal_mask(2, 5)),
                                  np.where(tril[3:], 0.0, -np.inf))


# -- a sampled id stays inside the vocabulary ------------------------------------------------------

V = 12          # uniform float32 probabilities 1/12 add up to 0.9999999, short of 1


def _u_just_below_one(monkeypatch):
    """minitf's generator drawing the largest float32 below 1 (a legal draw of [0, 1))."""
    def rand(*shape, dtype=None, like=None):
        return np.full(shape, np.nextafter(np.float32(1), np.float32(0)), dtype=dtype)
    monkeypatch.setattr(generation, "rand", rand)


def test_a_draw_past_a_cdf_that_rounds_short_of_one_is_the_last_id(monkeypatch):
    """A u past a float32 CDF that sums short of 1 draws id V−1, never the nonexistent id V."""
    logits = np.zeros((2, V), dtype=np.float32)
    probs, _ = F.softmax(logits, axis=-1)
    u = np.nextafter(np.float32(1), np.float32(0))
    assert np.cumsum(probs, axis=-1)[0, -1] < u                 # the rounding this is about
    _u_just_below_one(monkeypatch)
    ids = backend.to_numpy(sample_next(backend.to_device(logits)))
    assert ids.tolist() == [V - 1, V - 1]
    assert backend.to_numpy(sample_next(backend.to_device(logits), top_p=0.999)).max() < V


def test_generate_never_feeds_the_model_an_id_past_its_vocabulary(monkeypatch):
    """generate continues with V−1, not V, when every draw lands past the CDF's rounded end."""
    model = DecoderLM(V, d_model=8, n_heads=2, n_layers=1, max_len=8)
    for p in model.parameters():
        p.data[...] = 0
    _u_just_below_one(monkeypatch)
    for use_cache in (True, False):
        ids = generate(model, np.array([1, 2]), 3, use_cache=use_cache)
        assert ids.tolist() == [[1, 2, V - 1, V - 1, V - 1]]
