"""Softmax, log-softmax and the cross-entropy loss built on them.

    softmax:        p_i = exp(x_i) / Σ_j exp(x_j)
    log_softmax:    log p_i = x_i − log Σ_j exp(x_j)
    cross_entropy:  mean (or sum) over targets of −Σ_c q_c log p_c
"""
import math

from minitf.array_ops import row_dot, row_max, row_sum
from minitf.backend import float_errors_ignored, get_array_module, is_int
from minitf.validate import (at_the_boundary, check_array, check_float, check_ids, check_int,
                             check_probability, check_shape)
from minitf.validate_gradients import check_like, check_loss_gradient, gradient_of

REDUCTIONS = ("mean", "sum")


def _shifted(x, axis, out=None):
    """z = x − max(x) along ``axis`` (a new array, free to overwrite, or ``out``) and the row maxima.

    Subtracting the row maximum changes no probability (it cancels between numerator and
    denominator) but keeps exp() from overflowing. Two kinds of row have no finite maximum:
      all −inf (every key masked): shifted by 0 instead, so exp() gives zeros rather than NaN;
      holding +inf: x − max would be inf − inf = NaN. Such a row gets the limit of softmax as its
        +inf entries grow together: equal weight on each of them, 0 elsewhere -- z = 0 at the +inf
        entries and −inf at the others, which the usual exp and sum turn into exactly that.
    Only the row maxima are inspected, so ordinary input costs no extra pass over x (on CuPy,
    one wait for that small answer).
    An entry more than the float range below its row's maximum overflows to z = −inf: its
    probability, e^z, is 0 either way, so that overflow is expected and not warned about.
    """
    xp = get_array_module(x)
    maxima = row_max(x, axis)                     # the row maxima, the axis kept
    finite = xp.isfinite(maxima)
    usual = bool(finite.all())                              # every row's maximum is finite
    shift = maxima if usual else xp.where(finite, maxima, 0)
    with float_errors_ignored("over"):
        z = xp.subtract(x, shift, out=out)
    if not usual and bool(xp.isposinf(maxima).any()):       # rare: some row holds +inf
        # Such a row was shifted by 0, so its +inf entries are +inf in z too (even when out is x)
        limit = xp.where(xp.isposinf(z), 0.0, -math.inf)
        z[...] = xp.where(xp.isposinf(maxima), limit, z)
    return z, maxima


def _log_sum(z, axis):
    """log Σ exp(z) along ``axis`` (0 for a fully masked row, whose Σ is 0)."""
    xp = get_array_module(z)
    sums = row_sum(xp.exp(z), axis)
    return xp.log(xp.maximum(sums, 1.0))         # Σ ≥ 1 unless the row is fully masked (see softmax)


@at_the_boundary
def _check_rows(x, axis, where: str) -> None:
    """x: a float array with an axis ``axis`` to normalise along."""
    check_float(x, "x", where, min_ndim=1)
    check_int(axis, "axis", where, low=-x.ndim, high=x.ndim - 1,
              what=f"an axis of x, whose shape is {tuple(x.shape)}")
    if x.shape[axis] == 0:           # NumPy: "zero-size array to reduction operation maximum"
        raise ValueError(f"{where}: x has shape {tuple(x.shape)}, no entries along axis {axis}; "
                         f"wanted at least one to normalise over")


def softmax(x, axis=-1, out=None):
    """p = softmax(x) along ``axis`` (row-wise by default). A fully masked row gives all zeros;
    a row holding +inf shares its weight equally among its +inf entries (see _shifted).

    x: (...)  ->  p: (...), each row summing to 1 (or 0 if fully masked)
    out: where to write p, as NumPy's ``out=``; it may be x itself, which attention does with its
    scores: they are not needed again, and one array the size of the scores is saved.
    """
    _check_rows(x, axis, "softmax")
    if out is not None:               # else NumPy's broadcast or casting error, far from the call
        check_like(out, "out", x.shape, x.dtype, "softmax", "x")
    xp = get_array_module(x)
    z, _ = _shifted(x, axis, out)     # x's shape: x − max, the row's largest now 0
    p = xp.exp(z, out=z)              # in place: one exp and no new array for the scores
    sums = row_sum(p, axis)           # x's shape with the axis 1: Σ_j exp(z_j)
    # Σ ≥ 1 in every row that has a finite maximum (that entry adds e⁰ = 1); only a fully masked
    # row has Σ = 0, and max(Σ, 1) keeps its p at 0 instead of 0/0 = NaN
    p *= 1.0 / xp.maximum(sums, 1.0)
    return p, (p, axis)


@gradient_of("softmax's p", lambda cache: cache[0].shape)
def softmax_backward(dp, cache):
    """Jacobian of softmax: ∂p_i/∂x_j = p_i (δ_ij − p_j), so
        dx = p ⊙ (dp − Σ_j dp_j p_j)
    A fully masked row has p = 0 and therefore gets zero gradient. A row holding +inf gets the
    same formula at its limiting p (1/m on its m +inf entries): finite, and what a row with those
    entries merely huge (and equal) gives.
    """
    # BEGIN SOLUTION softmax_backward
    p, axis = cache
    return p * (dp - row_dot(dp, p, axis))          # row_dot: Σ_j dp_j p_j, one per row
    # END SOLUTION


def log_softmax(x, axis=-1):
    """log p = x − max − log Σ exp(x − max): the stable way to take the log of a softmax.

    x: (...)  ->  log p: (...)
    """
    _check_rows(x, axis, "log_softmax")
    z, _ = _shifted(x, axis)
    out = z - _log_sum(z, axis)
    return out, (out, axis)


@gradient_of("log_softmax's log p", lambda cache: cache[0].shape)
def log_softmax_backward(dout, cache):
    """log p_i = x_i − log Σ_j exp(x_j), so ∂ log p_i / ∂x_j = δ_ij − p_j and
        dx = dout − p Σ_i dout_i
    """
    # BEGIN SOLUTION log_softmax_backward
    out, axis = cache
    xp = get_array_module(out)
    return dout - xp.exp(out) * dout.sum(axis=axis, keepdims=True)
    # END SOLUTION


def cross_entropy(logits, targets, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    """Softmax cross-entropy over the targets that are not ``ignore_index``, averaged or summed.

    With p = softmax(logits) and the target distribution q = (1 − ε) onehot(y) + ε / V
    (label smoothing ε spreads a little belief over all V classes; ε = 0 gives plain −log p_y):
        L_t  = −Σ_c q_c log p_c                        the loss of one kept position t
        loss = (1 / N_kept) Σ_{kept t} L_t              reduction="mean" (the default)
        loss = Σ_{kept t} L_t                           reduction="sum"  (N_kept times the mean)
    If every target is ignored the loss is 0 (with zero gradient) rather than 0/0. The loss is
    summed in float64, so logits near the float32 limit give a finite, exact loss; a target whose
    probability is exactly 0 (its logit −inf, or another logit in its row +inf) costs inf.

    logits: (..., V)   targets: (...) integers in [0, V) or ignore_index
    ->   (loss, cache): loss a 0-d float64 array; the cache for cross_entropy_backward
    """
    where = "cross_entropy"
    check_shape(logits, "logits", ("...", "V"), where)
    check_float(logits, "logits", where)
    check_array(targets, "targets", where)
    if tuple(targets.shape) != tuple(logits.shape[:-1]):
        raise ValueError(f"{where}: targets has shape {tuple(targets.shape)}; wanted "
                         f"{tuple(logits.shape[:-1])}, the shape of logits without its last axis")
    check_probability(label_smoothing, "label_smoothing", where)
    if ignore_index is not None and not is_int(ignore_index):   # 1.5 or '1' matched no target
        raise TypeError(f"{where}: ignore_index must be an integer id, or None to ignore none; "
                        f"got {ignore_index!r}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"{where}: reduction must be one of {REDUCTIONS}; got {reduction!r}")
    n_classes = logits.shape[-1]
    check_ids(targets, "targets", n_classes, where, ignore_index=ignore_index, size_name="V")

    xp = get_array_module(logits)
    x = logits.reshape(-1, n_classes)                            # (N, V)
    z, maxima = _shifted(x, -1)
    log_sums = _log_sum(z, -1)                                   # (N, 1)
    logp = z - log_sums                                          # log p   (N, V)
    y = targets.reshape(-1)                                      # (N,)
    # (N,): a comparison with None, spelled out: NumPy says True everywhere, CuPy may raise
    kept = xp.ones(y.shape, dtype=bool) if ignore_index is None else y != ignore_index
    divisor = max(int(kept.sum()), 1) if reduction == "mean" else 1     # N_kept, or 1 to sum
    y = xp.where(kept, y, 0)                                     # any valid index; weight is 0
    rows = xp.arange(y.shape[0])
    # −log p_y = log Σ exp(z) − z_y in float64, with z_y recomputed from the logits: near the
    # float32 limit (±3e38) z = x − max overflows to −inf in float32, and the loss (up to 6.8e38)
    # to inf, while both are finite in float64. That is N numbers, not N × V.
    log_sums = log_sums[:, 0].astype("float64")
    maxima = maxima[:, 0]
    per_target = log_sums - _z64(maxima, x[rows, y], z[rows, y], xp)            # −log p_y  (N,)
    if label_smoothing:                                          # −Σ_c log p_c / V = lse − mean z
        mean_x = x.mean(axis=-1, dtype="float64")
        # mean z, which _z64 reads only in rows whose maximum is not finite: with none, mean_x
        # stands in, and the (N, V) pass over z is saved
        mean_z = mean_x if bool(xp.isfinite(maxima).all()) else z.mean(axis=-1, dtype="float64")
        uniform = log_sums - _z64(maxima, mean_x, mean_z, xp)
        per_target = (1.0 - label_smoothing) * per_target + label_smoothing * uniform
    # where(), not a product: an ignored row's −log p may be inf, and inf · 0 is NaN.
    loss = xp.where(kept, per_target, 0).sum() / divisor
    return loss, (logp, y, kept, divisor, label_smoothing, logits.shape)


def _z64(maxima, x_part, z_part, xp):
    """z = x − max in float64 for rows with a finite maximum; elsewhere (rows all −inf, or
    holding +inf) the z that _shifted defined. x_part, z_part: values or means, one per row."""
    finite = xp.isfinite(maxima)
    exact = x_part.astype("float64") - xp.where(finite, maxima, 0).astype("float64")
    return xp.where(finite, exact, z_part.astype("float64"))


def cross_entropy_backward(dloss, cache):
    """Fused gradient of log-softmax and cross-entropy: for each kept position
        dlogits = (p − q) / D · dloss,     q = (1 − ε) onehot(y) + ε / V
    and 0 for ignored positions, with D = N_kept for reduction="mean" and D = 1 for "sum" (each
    position's loss then reaches the total with weight 1). Why: a position's loss is
    −Σ_c q_c log p_c, and ∂ log p_c/∂z_j = δ_cj − p_j, so ∂/∂z_j = −q_j + p_j Σ_c q_c = p_j − q_j,
    as the target distribution q sums to 1 (one-hot or smoothed). Much simpler than chaining the
    two backward passes.
    dloss: scalar   ->   dlogits: (..., V)
    """
    check_loss_gradient(dloss, "cross_entropy_backward", cache)
    # BEGIN SOLUTION cross_entropy_backward
    logp, y, kept, divisor, label_smoothing, shape = cache
    xp = get_array_module(logp)
    dlogits = xp.exp(logp)                                       # p   (N, V)
    dlogits[xp.arange(y.shape[0]), y] -= 1.0 - label_smoothing
    if label_smoothing:
        dlogits -= label_smoothing / shape[-1]
    weight = kept * (dloss / divisor)                            # (N,)
    dlogits *= weight.astype(dlogits.dtype)[:, None]
    return dlogits.reshape(shape)
    # END SOLUTION
