"""Optimizers, gradient clipping and learning-rate schedules.

An optimizer holds a list of parameters and whatever per-parameter state its rule needs (a
velocity, two moment estimates); ``step()`` reads every ``p.grad`` and updates ``p.data`` in place.
The learning rate lives in ``optimizer.lr``; a schedule sets it before each step:

    for step in range(1, steps + 1):          # a schedule counts steps from 1, as Trainer does
        model.zero_grad(); loss, backward = model.loss(x, y); backward()
        clip_grad_norm(model.parameters(), 1.0)
        optimizer.lr = schedule(step); optimizer.step()

Counted from 0, a warm-up's first step would have a learning rate of 0 and change nothing.
"""
from __future__ import annotations

import math
import re

from minitf.backend import (backend_of, float_errors_ignored, get_array_module, is_array,
                            to_device, to_numpy)
from minitf.nn import Linear, Module, Parameter
from minitf.validate import (MOST_EXACT, check_int, check_probability, check_real,
                             not_real_numbers)


def _parameters(params, where: str) -> list:
    """A Module's parameters, or a non-empty list of Parameters, as a list; else one line."""
    try:
        params = params.parameters() if isinstance(params, Module) else list(params)
    except TypeError:                                   # not iterable: None, a number, …
        params = None
    if not params or not all(isinstance(p, Parameter) for p in params):
        raise TypeError(f"{where}: params must be a Module or a non-empty list of Parameter")
    return params


def _check_gradients(params: list, where: str, none_ok: bool = False) -> None:
    """ValueError unless every p.grad is an array of p's own shape (a gradient of another shape
    would broadcast into the update, or into the norm). ``none_ok``: None, no gradient at all
    (a frozen parameter), passes; the norms skip it, a step refuses it."""
    for i, p in enumerate(params):
        if p.grad is None and none_ok:
            continue
        if is_array(p.grad) and p.grad.shape == p.data.shape:
            if p.grad.dtype.kind != "f":     # a bool one is taken as 0s and 1s; complex fails far in
                raise TypeError(f"{where}: parameter {i} {p.data.shape} has a gradient of dtype "
                                f"{p.grad.dtype}; wanted floating-point numbers")
            continue
        got = ("no gradient" if p.grad is None else f"a gradient of shape {p.grad.shape}"
               if is_array(p.grad) else f"a {type(p.grad).__name__} as its gradient")
        raise ValueError(f"{where}: parameter {i} {p.data.shape} has {got}; wanted its "
                         f"own shape (a gradient of another shape would broadcast)")


def _check_finite(params: list, where: str) -> None:
    """ValueError, before any weight moves, when a gradient holds a NaN or an inf: a step would
    write it into its weight, and through Adam's moments into every later step. One sum per
    parameter, brought to the host together, finds it (a NaN or inf makes its sum one);
    Trainer's own check of the norm comes first, and says more."""
    with float_errors_ignored():                     # inf + (−inf) is NaN, said by a warning
        sums = [p.grad.sum() for p in params]
    xp = get_array_module(sums[0])
    finite = to_numpy(xp.isfinite(xp.stack(sums))).tolist()
    for i, (p, ok) in enumerate(zip(params, finite)):
        if ok or bool(xp.isfinite(p.grad).all()):     # finite numbers whose sum overflowed
            continue
        held = "NaN" if bool(xp.isnan(p.grad).any()) else "inf"
        raise ValueError(f"{where}: parameter {i} {p.data.shape} has a gradient holding {held}; "
                         f"wanted finite numbers (no weight was updated)")


class Optimizer:
    """Base class: the parameters, the learning rate, per-parameter state, saving and loading."""

    state_names: tuple = ()      # per-parameter arrays of the rule, e.g. ("m", "v")
    never_negative: tuple = ()   # those that are means of squares: √ of a negative one is NaN
    weight_decay: float = 0.0    # λ of an L2 penalty added to the gradient (SGD's, Adam's)

    def __init__(self, params, lr: float):
        where = type(self).__name__
        params = _parameters(params, where)
        if len({id(p) for p in params}) < len(params):     # it would be updated twice a step
            raise ValueError(f"{where}: params holds the same Parameter more than once")
        check_real(lr, "lr", where, low=0, low_open=False)
        self.params, self.lr, self.t = params, lr, 0
        self.state = {name: [get_array_module(p.data).zeros_like(p.data) for p in params]
                      for name in self.state_names}

    def _gradient(self, p):
        """g + λ·θ: the gradient of the loss plus an L2 penalty's, coupled to the rule's state."""
        return p.grad + self.weight_decay * p.data if self.weight_decay else p.grad

    def step(self) -> None:
        where = f"{type(self).__name__}.step"
        # lr may have been set since (a schedule's value, or by hand): a NaN or negative one
        # would quietly ruin every weight, or climb the loss
        check_real(self.lr, "lr", where, low=0, low_open=False)
        _check_gradients(self.params, where)   # all before any update: a refused step moves none
        _check_finite(self.params, where)
        self.t += 1
        for i, p in enumerate(self.params):
            self._follow(i, p)
            self._update(i, p)

    def _follow(self, i: int, p: Parameter) -> None:
        """A model moved (Module.to) after its optimizer was made: the state follows each
        parameter to its device and dtype, rather than update it in another precision."""
        for per_param in self.state.values():
            a = per_param[i]
            if a.dtype != p.data.dtype or backend_of(a) != backend_of(p.data):
                per_param[i] = to_device(a, backend_of(p.data), p.data.dtype)

    def _update(self, i: int, p: Parameter) -> None:
        raise NotImplementedError

    def state_dict(self) -> dict:
        """Host copies of every state array, {"m.0": …}, plus the step count and learning rate."""
        arrays = {f"{name}.{i}": to_numpy(a).copy()
                  for name, per_param in self.state.items() for i, a in enumerate(per_param)}
        return {"arrays": arrays, "t": self.t, "lr": self.lr}

    def load_state_dict(self, saved: dict) -> None:
        where = f"{type(self).__name__}.load_state_dict"
        if not isinstance(saved, dict) or not {"arrays", "t", "lr"} <= set(saved):
            raise ValueError(f"{where}: saved must be a dict holding 'arrays', 't' and 'lr', as "
                             f"state_dict() returns; got {str(saved)[:60]}")
        arrays = saved["arrays"]
        if not isinstance(arrays, dict):
            raise TypeError(f"{where}: saved['arrays'] is a {type(arrays).__name__}; wanted a "
                            f"dict of the state's arrays by name ("
                            f"{', '.join(f'{n}.0' for n in self.state_names)}, …), as "
                            f"state_dict() returns")
        check_int(saved["t"], "t", where, low=0, what="the number of steps taken")
        check_real(saved["lr"], "lr", where, low=0, low_open=False)
        self._check_same_parameters(arrays, where)
        cast = {}
        for name, per_param in self.state.items():
            for i, a in enumerate(per_param):
                key = f"{name}.{i}"
                if key not in arrays or getattr(arrays[key], "shape", None) != a.shape:
                    raise ValueError(f"{where}: state {key} is "
                                     f"missing or has the wrong shape; wanted {tuple(a.shape)}")
                if not_real_numbers(arrays[key]):
                    raise ValueError(f"{where}: state {key} {not_real_numbers(arrays[key])}")
                if name in self.never_negative and (arrays[key] < 0).any():
                    raise ValueError(f"{where}: state {key} holds negative values; wanted "
                                     f"≥ 0, a running mean of squared gradients (its square "
                                     f"root would make the weights NaN)")
                # cast here and checked again: 1e300 is finite in float64 and inf in float32
                with float_errors_ignored():             # the overflow is reported just below
                    cast[key] = to_device(arrays[key], backend_of(a), a.dtype).copy()
                if not_real_numbers(cast[key]):
                    raise ValueError(f"{where}: state {key} holds values beyond {a.dtype}'s "
                                     f"range; wanted finite numbers in the state's dtype")
        for name, per_param in self.state.items():         # all checked: now load them
            for i in range(len(per_param)):
                per_param[i] = cast[f"{name}.{i}"]
        self.t, self.lr = int(saved["t"]), float(saved["lr"])

    def _check_same_parameters(self, arrays: dict, where: str) -> None:
        """The saved state is of as many parameters as this optimizer's, and holds nothing else:
        a full model's state loaded into an optimizer of a few of its parameters (or a state of
        another rule) loaded the part that matched and said nothing of the rest."""
        found = [re.fullmatch(r"(\w+)\.(\d+)", str(key)) for key in arrays]
        indices = {int(m[2]) for m in found if m and m[1] in self.state_names}
        if indices == set(range(len(indices))) and len(indices) != len(self.params):
            raise ValueError(f"{where}: the saved state is of {len(indices)} parameter(s); this "
                             f"optimizer has {len(self.params)}; wanted the state of an "
                             f"optimizer of these same parameters")
        wanted = {f"{name}.{i}" for name in self.state_names for i in range(len(self.params))}
        unknown = sorted(str(key) for key in arrays if key not in wanted)
        if unknown:
            names = ", ".join(f"{name}.i" for name in self.state_names)
            raise ValueError(f"{where}: saved['arrays'] holds {', '.join(unknown[:3])}"
                             f"{' …' if len(unknown) > 3 else ''}, which is no state of this "
                             f"{type(self).__name__}; wanted only {names} for i < "
                             f"{len(self.params)}")


class SGD(Optimizer):
    """Stochastic gradient descent with (heavy-ball) momentum, as torch.optim.SGD:

        g ← g + λ·θ                (weight_decay λ, an L2 penalty)
        u ← μ·u + g                (velocity; u = g on the first step)
        θ ← θ − lr·u
    """

    state_names = ("velocity",)

    def __init__(self, params, lr: float = 0.01, momentum: float = 0.0, weight_decay: float = 0.0):
        super().__init__(params, lr)
        check_real(momentum, "momentum", "SGD", low=0, high=1, low_open=False)
        check_real(weight_decay, "weight_decay", "SGD", low=0, low_open=False)
        self.momentum, self.weight_decay = momentum, weight_decay

    def _update(self, i, p):
        g = self._gradient(p)
        if self.momentum:
            u = self.state["velocity"][i]
            u *= self.momentum if self.t > 1 else 0.0
            u += g
            g = u
        p.data -= self.lr * g


class Adam(Optimizer):
    """Adam (Kingma & Ba): a step per parameter scaled by running moments of its gradient.

        m ← β1·m + (1 − β1)·g          first moment (direction)
        v ← β2·v + (1 − β2)·g²         second moment (scale)
        m̂ = m / (1 − β1^t),  v̂ = v / (1 − β2^t)      (undo the bias of starting at zero)
        θ ← θ − lr · m̂ / (√v̂ + ε)
    weight_decay adds λ·θ to g (L2, coupled to the moments); see AdamW for the decoupled form.
    """

    state_names = ("m", "v")
    never_negative = ("v",)

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        super().__init__(params, lr)
        where = type(self).__name__
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"{where}: betas must be a pair (β1, β2); got {betas!r}")
        for i, beta in enumerate(betas):            # β = 1 would divide by 1 − β^t = 0
            check_probability(beta, f"betas[{i}]", where)
        check_real(eps, "eps", where, low=0)
        check_real(weight_decay, "weight_decay", where, low=0, low_open=False)
        self.betas, self.eps, self.weight_decay = tuple(betas), eps, weight_decay

    def _update(self, i, p):
        beta1, beta2 = self.betas
        g = self._gradient(p)
        m, v = self.state["m"][i], self.state["v"][i]
        xp = get_array_module(v)
        m *= beta1
        m += (1 - beta1) * g
        v *= beta2
        v += (1 - beta2) * (g * g)
        # The update Δθ = lr · m̂ / (√v̂ + ε), built in one array (each parameter-sized
        # temporary costs a pass over memory, and these run for every parameter at every step):
        delta = xp.sqrt(v)
        delta *= 1 / math.sqrt(1 - beta2 ** self.t)          # √v̂
        delta += self.eps
        xp.divide(m, delta, out=delta)                        # m / (√v̂ + ε)
        delta *= self.lr / (1 - beta1 ** self.t)              # lr · m̂ / (√v̂ + ε)
        p.data -= delta


def decayed(module: Module) -> set:
    """Ids of the parameters AdamW decays by default: the W of every ``nn.Linear``, and nothing
    else -- no bias, no LayerNorm γ or β, no token or position embedding, no CLS vector.
    (Pulling a norm's scale or a token's vector toward zero is not a useful prior.) A recurrent
    cell's W_x and W_h are no nn.Linear and are not decayed: in an RNNLM only its head is."""
    if not isinstance(module, Module):
        raise TypeError(f"decayed: module is a {type(module).__name__}; wanted a minitf module "
                        f"(AdamW given a list of parameters decays every one)")
    return {id(m.W) for m in module.modules() if isinstance(m, Linear)}


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter), as torch.optim.AdamW:

        θ ← θ − lr·λ·θ                  the decay, outside the moments
        then the Adam step on the plain gradient.
    Given a Module, only the weight matrices of linear maps are decayed (see ``decayed``); given
    a list of parameters, every one is.
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01):
        super().__init__(params, lr, betas, eps, weight_decay)
        chosen = decayed(params) if isinstance(params, Module) else {id(p) for p in self.params}
        self.decay = [weight_decay if id(p) in chosen else 0.0 for p in self.params]  # λ each

    def _gradient(self, p):
        """The plain gradient: AdamW's λ is no L2 term in g (that is Adam's weight_decay), it
        shrinks θ directly, in _update."""
        return p.grad

    def _update(self, i, p):
        if self.decay[i]:
            p.data *= 1 - self.lr * self.decay[i]
        super()._update(i, p)


def grad_norm(params) -> float:
    """The global L2 norm of all gradients, √(Σ_p Σ_i grad_i²), as a Python float. A parameter
    whose grad is None (frozen, or set so by hand) has no gradient and adds nothing to it."""
    return _norm(_parameters(params, "grad_norm"), "grad_norm")


def _norm(params: list, where: str) -> float:
    _check_gradients(params, where, none_ok=True)        # another shape: a norm of what?
    squares = [(p.grad * p.grad).sum() for p in params if p.grad is not None]
    if not squares:
        return 0.0
    # brought to the host together: on a GPU each float() would wait for the device once more
    return math.sqrt(sum(to_numpy(get_array_module(squares[0]).stack(squares)).tolist()))


def clip_grad_norm(params, max_norm: float) -> float:
    """Scale all gradients together so that their global L2 norm is at most ``max_norm``.

    Returns the norm before clipping (worth logging: spikes show instability). The direction of
    the update is kept; only its length is capped. A grad that is None is left None.
    """
    check_real(max_norm, "max_norm", "clip_grad_norm", low=0)
    params = _parameters(params, "clip_grad_norm")
    total = _norm(params, "clip_grad_norm")
    scale = max_norm / (total + 1e-6)
    # an inf norm would scale by 0 and turn every gradient NaN: they are left as they are, for
    # the caller (or the step, which refuses them) to see what went wrong
    if scale < 1.0 and math.isfinite(total):
        for p in params:
            if p.grad is not None:
                p.grad *= scale
    return total


# ----------------------------------------------------------------------------------------------
# Schedules: step (counted from 1) -> learning rate
# ----------------------------------------------------------------------------------------------

class Constant:
    """lr(t) = lr."""

    def __init__(self, lr: float):
        check_real(lr, "lr", "Constant", low=0, low_open=False)
        self.lr = lr

    def __call__(self, step: int) -> float:
        return self.lr


class WarmupCosine:
    """Linear warm-up to ``lr`` over ``warmup`` steps, then a cosine decay to ``min_lr`` at
    ``total`` steps (flat after). Warm-up keeps Adam's first, badly estimated steps small.

        lr(t) = lr · t / warmup                                          t ≤ warmup
        lr(t) = min_lr + (lr − min_lr) · ½ (1 + cos(π (t − warmup) / (total − warmup)))
    t is the step about to be taken, counted from 1: lr(0) = 0 would be a step that changes
    nothing (with warmup = 0 there is no ramp, and lr(0) is the full lr).
    """

    def __init__(self, lr: float, warmup: int, total: int, min_lr: float = 0.0):
        check_real(lr, "lr", "WarmupCosine", low=0, low_open=False)
        check_real(min_lr, "min_lr", "WarmupCosine", low=0, high=lr, low_open=False)
        check_int(warmup, "warmup", "WarmupCosine", low=0)
        check_int(total, "total", "WarmupCosine")
        if not warmup < total:
            raise ValueError(f"WarmupCosine: wanted 0 ≤ warmup < total; got warmup={warmup}, "
                             f"total={total}")
        self.lr, self.warmup, self.total, self.min_lr = lr, warmup, total, min_lr

    def __call__(self, step: int) -> float:
        check_int(step, "step", "WarmupCosine", low=0, what="the step count")   # -5: a negative lr
        if step <= self.warmup:                  # (warmup = 0: no ramp; step 0 is full lr)
            return self.lr * step / self.warmup if self.warmup else self.lr
        if step >= self.total:                   # flat after; no float of a huge step count
            return self.min_lr
        progress = (step - self.warmup) / (self.total - self.warmup)
        return self.min_lr + (self.lr - self.min_lr) * 0.5 * (1 + math.cos(math.pi * progress))


class Noam:
    """The schedule of "Attention is all you need": linear warm-up, then decay as 1/√t.

        lr(t) = factor · d_model^(−½) · min(t^(−½), t · warmup^(−3/2))
    t is the step about to be taken, counted from 1; t = 0, where t^(−½) is infinite, is taken
    as t = 1.
    """

    def __init__(self, d_model: int, warmup: int = 4000, factor: float = 1.0):
        check_int(d_model, "d_model", "Noam", high=MOST_EXACT)   # taken as floats: 10**400
        check_int(warmup, "warmup", "Noam", high=MOST_EXACT)     # overflowed them
        check_real(factor, "factor", "Noam", low=0)
        self.d_model, self.warmup, self.factor = d_model, warmup, factor

    def __call__(self, step: int) -> float:
        # t^(−½) takes t as a float, exact to 2^53: 10**400 overflowed it
        check_int(step, "step", "Noam", low=0, high=MOST_EXACT, what="the step count")
        step = max(step, 1)
        return (self.factor * self.d_model ** -0.5
                * min(step ** -0.5, step * self.warmup ** -1.5))
