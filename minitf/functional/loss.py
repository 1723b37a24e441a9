"""The mean squared error: the loss for predicting real numbers (a pixel's colour, a price)
rather than a class. (The classification loss, cross-entropy, lives beside softmax.)

    mse_loss:   L = (1 / N) Σ_i (pred_i − target_i)²       over all N entries
"""
from minitf.validate import check_float
from minitf.validate_gradients import check_like, check_loss_gradient


def mse_loss(pred, target):
    """L = mean((pred − target)²) over every entry, as torch.nn.functional.mse_loss.

    pred and target must have the same shape and dtype: no broadcasting, since a target of
    shape (n,) against a prediction of shape (n, 1) would silently average n² differences.

    pred: (...)   target: (...)   ->   loss: 0-d, the dtype of pred
    """
    where = "mse_loss"
    check_float(pred, "pred", where)              # integers: a mean of squares, not a regression
    check_like(target, "target", pred.shape, pred.dtype, where, "pred")
    if pred.size == 0:                            # the mean of no numbers is NaN
        raise ValueError(f"{where}: pred has shape {tuple(pred.shape)}, no entries; wanted at "
                         f"least one to average over")
    diff = pred - target                                         # e = pred − target   (...)
    loss = (diff * diff).mean()                                  # (1/N) Σ e²          ()
    return loss, diff


def mse_loss_backward(dloss, cache):
    """∂L/∂pred_i = 2 e_i / N and ∂L/∂target_i = −2 e_i / N, with e = pred − target:
        dpred = 2 e / N · dloss,     dtarget = −dpred
    dloss: scalar   ->   (dpred, dtarget), each of the shape of pred
    """
    check_loss_gradient(dloss, "mse_loss_backward", cache)
    diff = cache
    dpred = diff * (2.0 * float(dloss) / diff.size)      # a NumPy float64 dloss: pred's dtype kept
    return dpred, -dpred
