"""Recurrent layers, the baseline attention replaced: one state carried from step to step.

    vanilla RNN:  h_t = tanh(x_t W_x + h_{t−1} W_h + b)
    LSTM:         [i, f, g, o] = [σ, σ, tanh, σ](x_t W_x + h_{t−1} W_h + b)
                  c_t = f ⊙ c_{t−1} + i ⊙ g,     h_t = o ⊙ tanh(c_t)

The input part x_t W_x + b does not depend on earlier steps, so it is one big matmul over all
positions. The recurrent part cannot be: step t needs h_{t−1}, so n steps run one after the
other -- O(n) sequential steps, where attention needs one. Backpropagation through time (BPTT)
walks the same steps backwards; the gradient reaching h_t is the output's own plus what flows
back from step t+1 through W_h, so a signal from step n reaches step 1 through n − 1 products
with W_hᵀ and the tanh slopes: the path length is O(n) (attention's is O(1)).

Gate order i, f, g, o follows torch.nn.LSTM. Its weights are stored transposed there (4·d_h,
d_in), where these are (d_in, 4·d_h), and it has two biases, b_ih and b_hh, whose sum is b.
"""
from minitf.backend import get_array_module
from minitf.functional.linear import linear, linear_backward
from minitf.validate import check_same, check_shape
from minitf.validate_gradients import gradient_of


def _check(x, states, W_x, W_h, b, n_gates: int, where: str) -> None:
    """x: (b, n, d_in); every state (b, d_h); W_x (d_in, n_gates·d_h); W_h (d_h, n_gates·d_h)."""
    check_shape(W_h, "W_h", ("d_h", "gates·d_h"), where)       # two axes before reading d_h
    d_h = W_h.shape[0]
    check_shape(W_h, "W_h", ("d_h", (f"{n_gates}·d_h", n_gates * d_h)), where)
    check_shape(W_x, "W_x", ("d_in", (f"{n_gates}·d_h", n_gates * d_h)), where)
    check_shape(b, "b", ((f"{n_gates}·d_h", n_gates * d_h),), where)
    check_shape(x, "x", ("b", "n", ("d_in", W_x.shape[0])), where)
    for name, h in states.items():
        check_shape(h, name, ("b", ("d_h", d_h)), where)
        check_same(h.shape[0], x.shape[0], f"the batch of {name}", where)


def _previous(h0, H):
    """h_{t−1} for every t: h0 then H without its last step.   (b, d_h), (b, n, d_h) -> (b, n, d_h)"""
    n = H.shape[1]          # [:, :n] cuts nothing, but for n = 0 steps it drops h0, one too many
    return get_array_module(H).concatenate([h0[:, None], H[:, :-1]], axis=1)[:, :n]


def _weight_gradients(da, x, W_x, h0, H):
    """The gradients that sum over all steps, once the per-step da_t are known (one matmul each);
    da_t is the gradient of a step's pre-activation, the RNN's a_t or the LSTM's four gates' z_t:
        dx_t = da_t W_xᵀ,   dW_x = Σ_t x_tᵀ da_t,   dW_h = Σ_t h_{t−1}ᵀ da_t,   db = Σ_t da_t
    -> (dx, dW_x, dW_h, db).  The input part x W_x + b is linear's, so its three come from
    linear_backward, given the cache linear keeps: (x, W_x, with a bias)."""
    dx, dW_x, db = linear_backward(da, (x, W_x, True))   # (b, n, d_in), (d_in, ·), (gates·d_h,)
    h_prev = _previous(h0, H).reshape(-1, H.shape[-1])                 # (b·n, d_h)
    dW_h = h_prev.T @ da.reshape(-1, da.shape[-1])                     # (d_h, gates·d_h)
    return dx, dW_x, dW_h, db


def rnn(x, h0, W_x, W_h, b):
    """h_t = tanh(x_t W_x + h_{t−1} W_h + b) for t = 1 … n.

    x: (b, n, d_in)  h0: (b, d_h)  W_x: (d_in, d_h)  W_h: (d_h, d_h)  b (the bias): (d_h,)
    ->  H: (b, n, d_h), every step's state (the last one, H[:, -1], is h_n)
    """
    _check(x, {"h0": h0}, W_x, W_h, b, 1, "rnn")
    xp = get_array_module(x)
    a_x, _ = linear(x, W_x, b)                        # (b, n, d_h): all steps' input part at once
    H = xp.empty_like(a_x)                            # (b, n, d_h)
    h = h0                                            # (b, d_h)
    for t in range(x.shape[1]):                       # sequential: step t needs h_{t−1}
        h = xp.tanh(a_x[:, t] + h @ W_h)              # (b, d_h)
        H[:, t] = h
    return H, (x, h0, W_x, W_h, H)


@gradient_of("rnn's H", lambda cache: cache[-1].shape)     # (x, h0, W_x, W_h, H)
def rnn_backward(dH, cache):
    """Backpropagation through time for h_t = tanh(a_t), a_t = x_t W_x + h_{t−1} W_h + b.

    Going from t = n down to 1, with dh_{n+1→n} = 0:
        dh_t = dH_t + da_{t+1} W_hᵀ            (its own output's gradient + the next step's)
        da_t = dh_t ⊙ (1 − h_t²)               (tanh' = 1 − tanh²)
    then dx, dW_x, dW_h, db sum over the steps, and dh0 = da_1 W_hᵀ.
    -> (dx, dh0, dW_x, dW_h, db), the gradients of rnn's inputs in order
    """
    x, h0, W_x, W_h, H = cache
    xp = get_array_module(H)
    da = xp.empty_like(H)                             # (b, n, d_h)
    dh_back = xp.zeros_like(h0)                       # (b, d_h): what step t+1 sends back to h_t
    for t in reversed(range(H.shape[1])):
        dh = dH[:, t] + dh_back                       # (b, d_h)
        da[:, t] = dh * (1 - H[:, t] ** 2)
        dh_back = da[:, t] @ W_h.T                    # (b, d_h): to h_{t−1} (h0 when t = 1)
    dx, dW_x, dW_h, db = _weight_gradients(da, x, W_x, h0, H)
    return dx, dh_back, dW_x, dW_h, db


def _sigmoid(xp, z):
    """σ(z) = 1 / (1 + e^−z) = ½ (1 + tanh(z / 2)): the same function, and the tanh form never
    overflows (e^−z does, for z below −709 in float64)."""
    return 0.5 * (1 + xp.tanh(0.5 * z))


def lstm(x, h0, c0, W_x, W_h, b):
    """The LSTM over n steps, gates [i, f, g, o] = [σ, σ, tanh, σ](x_t W_x + h_{t−1} W_h + b):
        c_t = f ⊙ c_{t−1} + i ⊙ g        (the cell: added to, not squashed, at every step)
        h_t = o ⊙ tanh(c_t)

    x: (b, n, d_in)  h0, c0: (b, d_h)  W_x: (d_in, 4·d_h)  W_h: (d_h, 4·d_h)  b (the bias): (4·d_h,)
    ->  H: (b, n, d_h)
    """
    _check(x, {"h0": h0, "c0": c0}, W_x, W_h, b, 4, "lstm")
    xp = get_array_module(x)
    d_h = h0.shape[1]
    z_x, _ = linear(x, W_x, b)                        # (b, n, 4·d_h)
    gates = xp.empty_like(z_x)                        # (b, n, 4·d_h): i, f, g, o after σ / tanh
    H, C = xp.empty_like(z_x[..., :d_h]), xp.empty_like(z_x[..., :d_h])   # (b, n, d_h) each
    h, c = h0, c0
    for t in range(x.shape[1]):
        z = z_x[:, t] + h @ W_h                       # (b, 4·d_h)
        i, f, o = (_sigmoid(xp, z[:, k * d_h:(k + 1) * d_h]) for k in (0, 1, 3))
        g = xp.tanh(z[:, 2 * d_h:3 * d_h])
        c = f * c + i * g                             # (b, d_h)
        h = o * xp.tanh(c)                            # (b, d_h)
        gates[:, t] = xp.concatenate([i, f, g, o], axis=1)
        H[:, t], C[:, t] = h, c
    return H, (x, h0, c0, W_x, W_h, gates, H, C)


@gradient_of("lstm's H", lambda cache: cache[6].shape)    # (x, h0, c0, W_x, W_h, gates, H, C)
def lstm_backward(dH, cache):
    """BPTT through the LSTM, t = n … 1, with dh and dc from step t+1 starting at 0:
        dh  = dH_t + dz_{t+1} W_hᵀ                 dc = dc_{t+1 → t} + dh ⊙ o ⊙ (1 − tanh²(c_t))
        do  = dh ⊙ tanh(c_t)    di = dc ⊙ g    dg = dc ⊙ i    df = dc ⊙ c_{t−1}
        dz_t = [di ⊙ i(1−i), df ⊙ f(1−f), dg ⊙ (1−g²), do ⊙ o(1−o)]
        dc_{t → t−1} = dc ⊙ f      -- the cell's path back is a product of forget gates only
    -> (dx, dh0, dc0, dW_x, dW_h, db)
    """
    x, h0, c0, W_x, W_h, gates, H, C = cache
    xp = get_array_module(H)
    d_h = H.shape[-1]
    dz = xp.empty_like(gates)                         # (b, n, 4·d_h)
    dh_back, dc_back = xp.zeros_like(h0), xp.zeros_like(c0)       # (b, d_h) each
    c_prev = _previous(c0, C)                         # (b, n, d_h): c_{t−1}
    for t in reversed(range(H.shape[1])):
        i, f, g, o = (gates[:, t, k * d_h:(k + 1) * d_h] for k in range(4))   # (b, d_h) each
        tanh_c = xp.tanh(C[:, t])                     # (b, d_h)
        dh = dH[:, t] + dh_back                       # (b, d_h)
        dc = dc_back + dh * o * (1 - tanh_c ** 2)     # (b, d_h)
        dz[:, t] = xp.concatenate([dc * g * i * (1 - i), dc * c_prev[:, t] * f * (1 - f),
                                   dc * i * (1 - g ** 2), dh * tanh_c * o * (1 - o)], axis=1)
        dh_back, dc_back = dz[:, t] @ W_h.T, dc * f
    dx, dW_x, dW_h, db = _weight_gradients(dz, x, W_x, h0, H)
    return dx, dh_back, dc_back, dW_x, dW_h, db
