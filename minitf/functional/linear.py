"""Linear maps and embedding lookups: the two ways a Transformer turns numbers into features.

    linear:     y = x W + b
    embedding:  y = W[ids]          (a linear map applied to one-hot rows, done as a lookup)
"""
from minitf.array_ops import scatter_add, sum_over_positions
from minitf.backend import get_array_module
from minitf.validate import at_the_boundary, check_ids, check_int, check_shape, plain_int
from minitf.validate_gradients import gradient_of


@at_the_boundary
def _check_linear(x, W, b):
    """linear's arguments, checked at the boundary only: inside a model this is one call, and
    skipped. Three checks skipped one by one, each building its specs first, took 0.35 µs more
    a call; with layer norm's, that was 3 % of a generated token (nine linear layers and five
    layer norms a token in `minitf train`'s model)."""
    check_shape(W, "W", ("d_in", "d_out"), "linear")
    check_shape(x, "x", ("...", ("d_in", W.shape[0])), "linear")
    if b is not None:
        check_shape(b, "b", (("d_out", W.shape[1]),), "linear")


def linear(x, W, b=None):
    """y = x W + b, applied to every position at once.

    x: (..., d_in)   W: (d_in, d_out)   b: (d_out,) or None   ->   y: (..., d_out)
    """
    _check_linear(x, W, b)
    # One (positions, d_in) @ (d_in, d_out) product: NumPy runs a 3-D @ 2-D matmul as a loop
    # of small products, ~4× slower on a CPU than the same work as one big one.
    y = (x.reshape(-1, W.shape[0]) @ W).reshape(*x.shape[:-1], W.shape[1])   # (..., d_out)
    if b is not None:
        y += b
    return y, (x, W, b is not None)


@gradient_of("linear's y", lambda cache: (*cache[0].shape[:-1], cache[1].shape[1]))  # (..., d_out)
def linear_backward(dy, cache):
    """Gradients of y = x W + b.

    Every leading position used the same W and b, so their gradients sum over those positions:
        dx = dy Wᵀ                        (..., d_in)
        dW = Σ_positions xᵀ dy            (d_in, d_out)
        db = Σ_positions dy               (d_out,)   -- None when the forward had no bias
    """
    # BEGIN SOLUTION linear_backward
    x, W, has_bias = cache
    x_rows = x.reshape(-1, x.shape[-1])               # (positions, d_in)
    dy_rows = dy.reshape(-1, dy.shape[-1])            # (positions, d_out)
    dx = (dy_rows @ W.T).reshape(x.shape)             # (..., d_in)
    dW = x_rows.T @ dy_rows                           # (d_in, d_out)
    db = sum_over_positions(dy) if has_bias else None  # (d_out,)
    return dx, dW, db
    # END SOLUTION


def embedding(ids, W):
    """y = W[ids]: the row of the table for every token id.

    ids: (...) integers in [0, vocab)   W: (vocab, d)   ->   y: (..., d)
    """
    check_shape(W, "W", ("vocab", "d"), "embedding")
    check_ids(ids, "ids", W.shape[0], "embedding")
    return W[ids], (ids, W.shape)


@gradient_of("embedding's y", lambda cache: (*cache[0].shape, cache[1][1]))   # (*ids.shape, d)
def embedding_backward(dy, cache):
    """Gradient of y = W[ids] with respect to the table W.

    Each output row came from one table row, so its gradient goes back there. A token that
    occurs twice receives both gradients: a scatter-*add*, not an assignment.
        dW[v] = Σ_{positions p with ids[p] = v} dy[p]
    dy: (..., d)   ->   dW: (vocab, d)    (token ids are integers and have no gradient)
    """
    # BEGIN SOLUTION embedding_backward
    ids, W_shape = cache
    xp = get_array_module(dy)
    dW = xp.zeros(W_shape, dtype=dy.dtype)
    scatter_add(dW, ids.reshape(-1), dy.reshape(-1, W_shape[1]))
    return dW
    # END SOLUTION


def patches(images, patch_size):
    """Cut images into non-overlapping p×p patches and flatten each one: the tokens of a ViT.

    A patch is then just a vector of p·p·C numbers, and a linear map of it plays the part of a
    word embedding. Pure rearrangement (reshape + transpose), row by row of patches.
    images: (b, C, H, W) with H and W multiples of p   ->   (b, (H/p)·(W/p), p·p·C)
    """
    check_shape(images, "images", ("b", "C", "H", "W"), "patches")
    b, C, H, W = images.shape
    p = plain_int(patch_size)          # (a NumPy integer is as good as an int)
    check_int(p, "patch_size", "patches", what="the side of each square patch in pixels")
    if H % p or W % p:
        raise ValueError(f"patches: images of size H×W = {H}×{W} do not split into "
                         f"patch_size={p} squares; wanted H and W divisible by patch_size")
    grid = images.reshape(b, C, H // p, p, W // p, p)          # (b, C, rows, p, cols, p)
    tokens = grid.transpose(0, 2, 4, 3, 5, 1)                  # (b, rows, cols, p, p, C)
    return tokens.reshape(b, (H // p) * (W // p), p * p * C), (images.shape, p)


def _tokens_shape(cache):
    """(b, N, p·p·C), the shape of the tokens patches made, from its cache."""
    images_shape, p = cache
    b, C, H, W = images_shape
    return b, (H // p) * (W // p), p * p * C


@gradient_of("patches' tokens", _tokens_shape)
def patches_backward(dy, cache):
    """The same rearrangement run backwards: each patch's gradient goes back to its pixels.
    dy: (b, N, p·p·C)   ->   dimages: (b, C, H, W)
    """
    # BEGIN SOLUTION patches_backward
    (b, C, H, W), p = cache
    grid = dy.reshape(b, H // p, W // p, p, p, C).transpose(0, 5, 1, 3, 2, 4)
    return grid.reshape(b, C, H, W)
    # END SOLUTION
