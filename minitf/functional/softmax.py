"""Softmax, log-softmax and the cross-entropy loss built on them.

    softmax:        p_i = exp(x_i) / Σ_j exp(x_j)
    log_softmax:    log p_i = x_i − log Σ_j exp(x_j)
    cross_entropy:  mean over targets of −Σ_c q_c log p_c
"""
from minitf.backend import get_array_module
from minitf.validate import check_array, check_ids, check_probability, check_shape


def _shifted(x, axis):
    """x − max(x) along ``axis``, and the row sums of its exponentials.

    Subtracting the row maximum changes no probability (it cancels between numerator and
    denominator) but keeps exp() from overflowing. A row that is all −inf -- every key masked --
    has no finite maximum; it is shifted by 0 instead, so exp() gives zeros rather than NaN.
    """
    xp = get_array_module(x)
    row_max = x.max(axis=axis, keepdims=True)
    row_max = xp.where(xp.isfinite(row_max), row_max, 0)
    z = x - row_max
    sums = xp.exp(z).sum(axis=axis, keepdims=True)
    return z, sums


def softmax(x, axis=-1):
    """p = softmax(x) along ``axis`` (row-wise by default). A fully masked row gives all zeros.

    x: (...)  ->  p: (...), each row summing to 1 (or 0 if fully masked)
    """
    xp = get_array_module(x)
    z, sums = _shifted(x, axis)
    p = xp.exp(z)
    p /= xp.where(sums > 0, sums, 1)
    return p, (p, axis)


def softmax_backward(dp, cache):
    """Jacobian of softmax: ∂p_i/∂x_j = p_i (δ_ij − p_j), so
        dx = p ⊙ (dp − Σ_j dp_j p_j)
    A fully masked row has p = 0 and therefore gets zero gradient.
    """
    # BEGIN SOLUTION softmax_backward
    p, axis = cache
    return p * (dp - (dp * p).sum(axis=axis, keepdims=True))
    # END SOLUTION


def log_softmax(x, axis=-1):
    """log p = x − max − log Σ exp(x − max): the stable way to take the log of a softmax.

    x: (...)  ->  log p: (...)
    """
    xp = get_array_module(x)
    z, sums = _shifted(x, axis)
    out = z - xp.log(xp.where(sums > 0, sums, 1))
    return out, (out, axis)


def log_softmax_backward(dout, cache):
    """log p_i = x_i − log Σ_j exp(x_j), so ∂ log p_i / ∂x_j = δ_ij − p_j and
        dx = dout − p Σ_i dout_i
    """
    # BEGIN SOLUTION log_softmax_backward
    out, axis = cache
    xp = get_array_module(out)
    return dout - xp.exp(out) * dout.sum(axis=axis, keepdims=True)
    # END SOLUTION


def cross_entropy(logits, targets, ignore_index=-100, label_smoothing=0.0):
    """Softmax cross-entropy, averaged over the targets that are not ``ignore_index``.

    With p = softmax(logits) and the target distribution q = (1 − ε) onehot(y) + ε / V
    (label smoothing ε spreads a little belief over all V classes; ε = 0 gives plain −log p_y):
        loss = (1 / N_kept) Σ_{kept positions} −Σ_c q_c log p_c
    If every target is ignored the loss is 0 (with zero gradient) rather than 0/0.

    logits: (..., V)   targets: (...) integers in [0, V) or ignore_index   ->   loss: 0-d array
    """
    where = "cross_entropy"
    check_shape(logits, "logits", ("...", "V"), where)
    check_array(targets, "targets", where)
    if tuple(targets.shape) != tuple(logits.shape[:-1]):
        raise ValueError(f"{where}: targets has shape {tuple(targets.shape)}; wanted "
                         f"{tuple(logits.shape[:-1])}, the shape of logits without its last axis")
    check_probability(label_smoothing, "label_smoothing", where)
    n_classes = logits.shape[-1]
    check_ids(targets, "targets", n_classes, where, ignore_index=ignore_index, size_name="V")

    xp = get_array_module(logits)
    logp, _ = log_softmax(logits.reshape(-1, n_classes))         # (N, V)
    y = targets.reshape(-1)                                      # (N,)
    kept = y != ignore_index                                     # (N,)
    n_kept = int(kept.sum())
    y = xp.where(kept, y, 0)                                     # any valid index; weight is 0
    rows = xp.arange(y.shape[0])
    per_target = -logp[rows, y]                                  # −log p_y       (N,)
    if label_smoothing:
        uniform = -logp.mean(axis=-1)                            # −Σ_c log p_c / V
        per_target = (1.0 - label_smoothing) * per_target + label_smoothing * uniform
    loss = (per_target * kept).sum() / max(n_kept, 1)
    return loss, (logp, y, kept, n_kept, label_smoothing, logits.shape)


def cross_entropy_backward(dloss, cache):
    """Fused gradient of log-softmax and cross-entropy: for each kept position
        dlogits = (p − q) / N_kept · dloss,     q = (1 − ε) onehot(y) + ε / V
    and 0 for ignored positions. Much simpler than chaining the two backward passes.
    dloss: scalar   ->   dlogits: (..., V)
    """
    # BEGIN SOLUTION cross_entropy_backward
    logp, y, kept, n_kept, label_smoothing, shape = cache
    xp = get_array_module(logp)
    dlogits = xp.exp(logp)                                       # p   (N, V)
    dlogits[xp.arange(y.shape[0]), y] -= 1.0 - label_smoothing
    if label_smoothing:
        dlogits -= label_smoothing / shape[-1]
    weight = kept * (dloss / max(n_kept, 1))                     # (N,)
    dlogits *= weight.astype(dlogits.dtype)[:, None]
    return dlogits.reshape(shape)
    # END SOLUTION
