"""Optimizers match torch.optim step for step on the same gradients; clipping and schedules
follow their formulas."""
import math
import re

import numpy as np
import pytest

import minitf.nn as nn
from minitf import backend, optim
from minitf.models import DecoderLM

torch = pytest.importorskip("torch")

SHAPES = [(4, 3), (3,), (5, 2)]


def _run_both(make_ours, make_theirs, steps=10, weight_decayed=None):
    """Ten steps of each optimizer on identical parameters and identical random gradients."""
    with backend.precision("float64"), backend.seed(0):
        ours = [nn.Parameter(backend.randn(*s)) for s in SHAPES]
        theirs = [torch.tensor(backend.to_numpy(p.data), requires_grad=True) for p in ours]
        opt, opt_torch = make_ours(ours), make_theirs(theirs)
        for _ in range(steps):
            for p, t in zip(ours, theirs):
                p.grad = backend.randn(*p.shape)
                t.grad = torch.tensor(backend.to_numpy(p.grad))
            opt.step()
            opt_torch.step()
        for p, t in zip(ours, theirs):
            assert np.abs(backend.to_numpy(p.data) - t.detach().numpy()).max() <= 1e-12


def test_sgd_with_momentum_and_weight_decay_matches_torch(backend_name):
    _run_both(lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
              lambda ts: torch.optim.SGD(ts, lr=0.1, momentum=0.9, weight_decay=0.01))


def test_plain_sgd_matches_torch(backend_name):
    _run_both(lambda ps: optim.SGD(ps, lr=0.05), lambda ts: torch.optim.SGD(ts, lr=0.05))


def test_adam_matches_torch(backend_name):
    _run_both(lambda ps: optim.Adam(ps, lr=0.01, betas=(0.8, 0.99), weight_decay=0.1),
              lambda ts: torch.optim.Adam(ts, lr=0.01, betas=(0.8, 0.99), weight_decay=0.1))


def test_adamw_matches_torch(backend_name):
    _run_both(lambda ps: optim.AdamW(ps, lr=0.01, weight_decay=0.1),
              lambda ts: torch.optim.AdamW(ts, lr=0.01, weight_decay=0.1))


def test_adamw_skips_biases_norms_and_embeddings_by_default():
    model = DecoderLM(11, 8, 2, 1, max_len=4, tie_weights=False)
    opt = optim.AdamW(model, weight_decay=0.1)
    assert opt.weight_decay == 0.1              # λ, as torch's AdamW reads it (it read 0 here)
    decayed = {name for (name, _), wd in zip(model.named_parameters(), opt.decay) if wd}
    assert decayed == {"blocks.blocks.0.self_attn.layer.W_qkv.W",
                       "blocks.blocks.0.self_attn.layer.W_o.W",
                       "blocks.blocks.0.ffn.layer.W_1.W", "blocks.blocks.0.ffn.layer.W_2.W",
                       "head.W"}
    # and a step decays those alone: with every gradient 0 the Adam step moves nothing, so each
    # decayed W becomes (1 − lr·λ) W and the rest stay as they were (a list of which to decay
    # was checked, not what the step did with it)
    before = {name: backend.to_numpy(p.data).copy() for name, p in model.named_parameters()}
    model.zero_grad()
    opt.lr = 0.5
    opt.step()
    for name, p in model.named_parameters():
        factor = 1 - 0.5 * 0.1 if name in decayed else 1.0
        assert np.allclose(backend.to_numpy(p.data), factor * before[name], rtol=1e-6,
                           atol=0), name


def test_clip_grad_norm_matches_torch():
    with backend.precision("float64"), backend.seed(0):
        ours = [nn.Parameter(backend.randn(*s)) for s in SHAPES]
        theirs = [torch.zeros(s, dtype=torch.float64, requires_grad=True) for s in SHAPES]
        for p, t in zip(ours, theirs):
            p.grad = backend.randn(*p.shape) * 3
            t.grad = torch.tensor(backend.to_numpy(p.grad))
        norm = optim.clip_grad_norm(ours, 1.0)
        norm_torch = torch.nn.utils.clip_grad_norm_(theirs, 1.0)
        assert math.isclose(norm, float(norm_torch), rel_tol=1e-12)
        for p, t in zip(ours, theirs):
            assert np.abs(backend.to_numpy(p.grad) - t.grad.numpy()).max() <= 1e-12
        assert math.isclose(optim.clip_grad_norm(ours, 10.0), 1.0, rel_tol=1e-5)  # left as is


def test_every_optimizer_shares_the_base_class_and_a_bare_one_cannot_step():
    params = [nn.Parameter(backend.randn(2))]
    assert all(isinstance(make(params), optim.Optimizer)
               for make in (optim.SGD, optim.Adam, optim.AdamW))
    with pytest.raises(NotImplementedError):
        optim.Optimizer(params, lr=0.1).step()


def test_constant_schedule():
    assert [optim.Constant(3e-4)(t) for t in (1, 10, 10_000)] == [3e-4] * 3


def test_warmup_cosine_schedule():
    s = optim.WarmupCosine(1e-3, warmup=10, total=110, min_lr=1e-4)
    assert s(5) == pytest.approx(5e-4) and s(10) == pytest.approx(1e-3)
    assert s(60) == pytest.approx(1e-4 + 0.9e-3 * 0.5)              # half way down the cosine
    assert s(110) == pytest.approx(1e-4) and s(500) == pytest.approx(1e-4)


def test_noam_schedule_peaks_at_warmup_then_decays_as_inverse_sqrt():
    s = optim.Noam(512, warmup=4000)
    assert s(4000) == pytest.approx(512 ** -0.5 * 4000 ** -0.5)
    assert s(2000) == pytest.approx(s(4000) / 2)                      # linear warm-up
    assert s(16000) == pytest.approx(s(4000) / 2)                     # 1/√t decay
    assert max(s(t) for t in range(1, 10000, 7)) <= s(4000)


def test_the_optimizer_state_round_trips():
    with backend.precision("float64"), backend.seed(0):
        params = [nn.Parameter(backend.randn(3, 2))]
        params[0].grad = backend.randn(3, 2)
        opt = optim.Adam(params, lr=0.1)
        opt.step()
        again = optim.Adam(params, lr=0.5)
        again.load_state_dict(opt.state_dict())
        assert again.t == 1 and again.lr == 0.1
        assert np.array_equal(backend.to_numpy(again.state["v"][0]),
                              backend.to_numpy(opt.state["v"][0]))


def test_bad_arguments():
    with pytest.raises(TypeError, match="params must be"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="lr must be"):
        optim.Adam([nn.Parameter(backend.randn(2))], lr=-1)
    with pytest.raises(ValueError, match="warmup"):
        optim.WarmupCosine(1e-3, warmup=10, total=5)


@pytest.mark.parametrize("build, message", [
    (lambda ps: optim.SGD(None), "SGD: params must be a Module or a non-empty list of Parameter"),
    (lambda ps: optim.SGD(ps, lr=float("nan")), "SGD: lr must be a finite number ≥ 0; got nan"),
    (lambda ps: optim.AdamW(ps, lr="0.01"), "AdamW: lr must be a finite number ≥ 0; got '0.01'"),
    (lambda ps: optim.SGD(ps, momentum=1.5), "SGD: momentum must be a finite number ≥ 0 and ≤ 1"),
    (lambda ps: optim.SGD(ps, weight_decay=-0.1), "SGD: weight_decay must be a finite number ≥ 0"),
    (lambda ps: optim.Adam(ps, betas=(1.0, 0.999)), "Adam: betas[0] must lie in [0, 1); got 1.0"),
    (lambda ps: optim.Adam(ps, betas=(0.9,)), "Adam: betas must be a pair (β1, β2); got (0.9,)"),
    (lambda ps: optim.Adam(ps, eps=0), "Adam: eps must be a finite number > 0; got 0"),
    (lambda ps: optim.AdamW(ps, weight_decay=float("nan")), "AdamW: weight_decay must be a finite"),
    (lambda ps: optim.clip_grad_norm(ps, -1.0), "clip_grad_norm: max_norm must be a finite number > 0"),
    (lambda ps: optim.Constant(-1), "Constant: lr must be a finite number ≥ 0; got -1"),
    (lambda ps: optim.WarmupCosine(1e-3, 10, 100, min_lr=1e-2), "WarmupCosine: min_lr must be"),
    (lambda ps: optim.WarmupCosine(-1e-3, 10, 100), "WarmupCosine: lr must be a finite number ≥ 0"),
    (lambda ps: optim.Noam(-64), "Noam: d_model must be a positive integer (and ≤ 2^53 = "
                                 "9007199254740992); got -64"),
    (lambda ps: optim.Noam(64, warmup=0), "Noam: warmup must be a positive integer (and ≤ 2^53 "
                                          "= 9007199254740992); got 0"),
])
def test_a_bad_setting_is_one_line_when_the_optimizer_is_made(build, message):
    """Each of these was taken: a NaN or negative rate, a β of 1, a negative max_norm reversed
    the gradients; now each is refused where it is given."""
    with pytest.raises((TypeError, ValueError), match="^" + re.escape(message)):
        build([nn.Parameter(backend.randn(2))])


def test_warmup_cosine_without_warm_up_starts_at_full_rate():
    schedule = optim.WarmupCosine(1e-3, warmup=0, total=10)
    assert schedule(0) == 1e-3 and schedule(1) == pytest.approx(1e-3, rel=0.05)   # once divided by 0


def test_the_state_follows_a_model_moved_after_its_optimizer_was_made():
    """model.to(dtype=float64) after AdamW(model): the moments move with the parameters (exactly,
    float32 to float64), instead of updating float64 weights in float32."""
    layer = nn.Linear(3, 2)
    opt = optim.AdamW(layer, lr=0.1)
    layer.W.grad += 1.0
    opt.step()
    m32 = opt.state["m"][0].copy()
    layer.to(dtype="float64")
    layer.W.grad += 1.0
    opt.step()
    assert opt.state["m"][0].dtype == opt.state["v"][0].dtype == np.float64
    np.testing.assert_array_equal(opt.state["m"][0], 0.9 * m32.astype(np.float64) + 0.1)
    assert layer.W.data.dtype == np.float64


def test_noam_takes_step_zero_as_step_one():
    """t = 0, where t^(−½) is infinite, is taken as t = 1 (as its docstring says): Noam(…)(0)
    raised ZeroDivisionError."""
    s = optim.Noam(512, warmup=4000, factor=2.0)
    assert s(0) == s(1) == 2.0 * 512 ** -0.5 * 4000 ** -1.5
