"""Module: what every layer in minitf.nn is built from (with its Parameters, nn.parameter).

A Module holds parameters and, between a forward and a backward pass, the cache its forward left
behind. There is no autograd: each module writes its own backward, by hand, next to its forward.

    y  = module(x)             # forward: computes y, keeps what backward needs
    dx = module.backward(dy)   # backward: returns dL/dx, and ADDS dL/dW into every W.grad

Gradients accumulate (+=) so that a parameter used in two places gets the sum of both uses;
call ``zero_grad()`` before each new backward pass. A forward that no backward will follow
(evaluation, generation) runs under ``with no_grad():`` and keeps nothing.
"""
from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from contextlib import contextmanager

from minitf.backend import (backend_of, check_backend_name, float_dtype_named,
                            float_errors_ignored, get_array_module, is_array, to_device, to_numpy)
from minitf.nn.parameter import Parameter
from minitf.validate import (at_the_boundary, check_dtype, check_flags, check_shape, nesting,
                             not_real_numbers)
from minitf.validate_gradients import check_like

_NO_CACHE = object()   # "forward has not run" -- distinct from a cache that is legitimately None
_UNRECORDED = object()  # "forward has run, its output not recorded" (see _recording_output)
_KEPT_NOTHING = object()  # "forward has run under no_grad(): nothing kept for a backward"


class _GradMode(threading.local):
    enabled = True          # per thread, as a model's state of nesting (validate.nesting)


_grad_mode = _GradMode()


@contextmanager
def no_grad():
    """``with no_grad(): logits = model(x)`` -- forwards that keep nothing for a backward, as
    torch.no_grad(): for evaluation and generation, where no backward follows. What each layer
    would have kept (its input, GELU's Φ(x), …) is let go as soon as the forward is done with it,
    so its memory is reused at once: the NumPy memory a forward of `minitf train`'s model peaks at
    falls from 44 to 27 MiB (benchmarks/RESULTS.md, thirty-first entry). The outputs are the same
    to the last bit; a backward after such a forward is an error that says why. (An attention
    layer still keeps its last forward's q, k, v and weights, for ``probs``.)"""
    before, _grad_mode.enabled = _grad_mode.enabled, False
    try:
        yield
    finally:
        _grad_mode.enabled = before


def grad_enabled() -> bool:
    """False inside ``no_grad()``: a forward there keeps nothing for a backward."""
    return _grad_mode.enabled


def as_tuple(grads) -> tuple:
    """A module's backward returns one gradient or a tuple of them; this always gives a tuple."""
    return grads if isinstance(grads, tuple) else (grads,)


def _enter(module) -> tuple:
    """Count ``module`` as running (one level deeper; one model more if it is one) and return the
    state outside it, which the caller puts back when the module is done."""
    outer = nesting.state
    nesting.state = (outer[0] + 1, outer[1] + module.is_model)
    return outer


def _defines_call(cls) -> bool:
    """Whether ``cls`` or a parent of it below Module has a ``__call__`` of its own, which must
    then stay what calling the module does (the others' __call__ is their wrapped forward)."""
    below_module = cls.__mro__[:cls.__mro__.index(Module)]
    return any("__call__" in vars(c) and vars(c)["__call__"] is not vars(c).get("forward")
               for c in below_module)


def _recording_output(forward_of_class):
    @functools.wraps(forward_of_class)
    def forward(self, *args, **kwargs):
        outer = nesting.state              # inside a model, its layers skip the input checks
        if outer[1] and outer[0] > 1:
            # Already among a model's layers, where every check is skipped: one level deeper
            # changes nothing, so the state is left as it is. A generated token passes some
            # forty modules; the writes to a thread-local and the records cost 4-5 % of its time.
            y = forward_of_class(self, *args, **kwargs)
            self._output = _UNRECORDED
            return y
        self._output = None              # a forward that fails leaves nothing to go back through
        nesting.state = (outer[0] + 1, outer[1] + self.is_model)     # _enter(self), spelled out
        try:
            y = forward_of_class(self, *args, **kwargs)
        finally:
            nesting.state = outer
        # A model's layers record no output: the model checks the gradient its own backward is
        # given, and its layers trust the ones it passes them, as they trust their input.
        if not _grad_mode.enabled:
            self._output = _KEPT_NOTHING
        elif is_array(y) and not outer[1]:
            self._output = (y.shape, y.dtype)
        else:
            self._output = _UNRECORDED
        return y
    return forward


def _checking_gradient(backward_of_class):
    @functools.wraps(backward_of_class)
    def backward(self, dy, *args, **kwargs):      # named so: tracers see a call to a backward
        outer = _enter(self)
        try:
            # Checked here, for every module: one that keeps nothing of its own (a Residual, a
            # block) would otherwise fail in a layer inside it, under that layer's name.
            if self._output is None:
                raise _not_run(self, "backward")
            if self._output is _KEPT_NOTHING:
                raise _ran_without_grad(self, "backward")
            if isinstance(self._output, tuple):                     # (shape, dtype) recorded
                check_like(dy, "dy", *self._output, f"{type(self).__name__}.backward",
                           "the last forward's output")
            dx = backward_of_class(self, dy, *args, **kwargs)
            self._output = None                   # one backward a forward, as with the cache
            return dx
        finally:
            nesting.state = outer
    return backward


def _ran_without_grad(module, caller: str) -> RuntimeError:
    """The error for ``caller`` when the last forward ran under no_grad(), keeping nothing."""
    return RuntimeError(f"{type(module).__name__}.{caller}(): the last forward ran under "
                        f"minitf.nn.no_grad(), which keeps nothing for a backward; run the "
                        f"forward outside it to train")


def _not_run(module, caller: str) -> RuntimeError:
    """The error for ``caller`` (a method name) when no forward has run since the last backward."""
    then = (", then call backward() once with the gradient of its output"
            if caller == "backward" else "")
    return RuntimeError(f"{type(module).__name__}.{caller}() was called with no forward() since "
                        f"the last backward(), or none at all: run the module on an input "
                        f"first{then}")


class Module:
    """Base class of every layer. Subclasses write ``forward`` and ``backward``.

    Parameters and sub-modules are found by looking at the attributes (in the order they were
    set), including lists of modules, so names come out like ``tok_emb.W`` or a DecoderLM's
    ``blocks.blocks.0.self_attn.layer.W_o.W`` (its Stack ``blocks`` keeps the list ``blocks``,
    and each sublayer is a Residual around its ``layer``). A layer of your own needs no
    ``super().__init__()``; its parameters come from ``normal``, ``zeros`` or ``ones`` (in the
    default float dtype), its forward keeps what the backward needs with ``self._save(...)``,
    and its backward takes it back with ``self._pop_cache()`` (an error if no forward ran since
    the last backward). For example, one learned scale::

        class Scale(Module):
            # y = a x, with a one learned number

            def __init__(self):
                self.a = ones(1)                    # nn.parameter's: .data (1,), .grad (1,)

            def forward(self, x):
                self._save(x)                       # x (...): what dL/da needs
                return self.a.data * x

            def backward(self, dy):
                x = self._pop_cache()
                self.a.grad += (dy * x).sum()       # += : a parameter may be used twice
                return dy * self.a.data             # dL/dx (...)

    ``minitf.gradcheck.check("Scale", ModuleCase(Scale(), {"x": x}))`` then checks both
    gradients (under ``minitf.backend.precision("float64")``).
    """

    training = True
    is_model = False         # a whole model checks its input; its layers then trust theirs
    _cache = _NO_CACHE
    _output = None           # no forward since the last backward; else (shape, dtype) of its
    #                          output, if one array and the module was not run by a model, or
    #                          _UNRECORDED (see _recording_output)

    def __init_subclass__(cls, **kwargs):
        """Wrap each subclass's own forward and backward once, generically: forward records the
        shape and dtype of its output (unless a model runs it: the model checks for its layers),
        and backward refuses a ``dy`` that does not have them. Calling the module then runs the
        wrapped forward itself (unless the class has a ``__call__`` of its own)."""
        super().__init_subclass__(**kwargs)
        if "forward" in vars(cls):
            cls.forward = _recording_output(vars(cls)["forward"])
            if not _defines_call(cls):
                cls.__call__ = cls.forward     # module(x) *is* the forward: no call in between
        if "backward" in vars(cls):
            cls.backward = _checking_gradient(vars(cls)["backward"])

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def backward(self, dy):
        raise NotImplementedError(f"{type(self).__name__} does not define backward()")

    # -- the cache between forward and backward --------------------------------------------------

    def _save(self, cache) -> None:
        # under no_grad() the cache is dropped here, and its arrays freed for the next layer
        self._cache = cache if _grad_mode.enabled else _KEPT_NOTHING

    def _pop_cache(self):
        """The cache the last forward saved; freed here so the arrays it holds can be released."""
        cache, self._cache = self._peek_cache("backward"), _NO_CACHE
        return cache

    def _peek_cache(self, caller: str):
        """The cache the last forward saved, left in place; ``caller`` names the method for the
        error when no forward has run since the last backward."""
        if self._cache is _NO_CACHE:
            if caller == "backward" and self._output is not None:     # its forward did run
                raise RuntimeError(f"{type(self).__name__}.backward(): its forward ran but kept "
                                   f"nothing for it with self._save(...) (or this backward took "
                                   f"the cache already); wanted what the backward needs saved "
                                   f"there")
            raise _not_run(self, caller)
        if self._cache is _KEPT_NOTHING:
            raise _ran_without_grad(self, caller)
        return self._cache

    # -- checks at the boundary ------------------------------------------------------------------

    # Skipped inside a model, whose own input was checked at its boundary: a shape check and a
    # first parameter found in every layer, at every generated token, add up to more than a
    # small model's arithmetic for that token (minitf.validate.at_the_boundary).
    @at_the_boundary
    def _check_input(self, x, name: str, spec) -> None:
        """Shape against ``spec`` (see minitf.validate) and dtype against the parameters'."""
        where = type(self).__name__
        check_shape(x, name, spec, where)
        first = next(self.named_parameters(), None)
        if first is not None:
            check_dtype(x, name, first[1].data.dtype, where)

    # -- walking the tree ------------------------------------------------------------------------

    def children(self):
        """(name, module) for the direct sub-modules, lists of modules included."""
        for name, value in vars(self).items():
            if isinstance(value, Module):
                yield name, value
            elif isinstance(value, (list, tuple)):
                for i, item in enumerate(value):
                    if isinstance(item, Module):
                        yield f"{name}.{i}", item

    def modules(self):
        """This module and every module below it."""
        yield self
        for _, child in self.children():
            yield from child.modules()

    def named_parameters(self, prefix: str = ""):
        """(dotted name, Parameter) for every parameter of this module and its sub-modules.

        A parameter shared by two modules (tied embeddings) is listed once, under its first name:
        it is one array, updated once per step, and its .grad holds the sum of both uses.
        """
        seen = set()
        for name, p in self._all_parameters(prefix):
            if id(p) not in seen:
                seen.add(id(p))
                yield name, p

    def _all_parameters(self, prefix: str):
        for name, value in vars(self).items():
            if isinstance(value, Parameter):
                yield prefix + name, value
        for name, child in self.children():
            yield from child._all_parameters(f"{prefix}{name}.")

    def parameters(self) -> list:
        return [p for _, p in self.named_parameters()]

    def num_parameters(self) -> int:
        return sum(int(p.data.size) for p in self.parameters())

    def zero_grad(self) -> None:
        """Set every parameter's .grad to 0: backward adds into it, so call this before each new
        backward pass (an optimizer's step does not; minitf.train's Trainer does, each step)."""
        for p in self.parameters():
            if is_array(p.grad) and p.grad.shape == p.data.shape:
                p.grad.fill(0)
            else:                  # set to None by hand (as torch's zero_grad does), or replaced
                p.grad = get_array_module(p.data).zeros_like(p.data)

    def train(self, mode: bool = True) -> "Module":
        """Training mode (dropout active) for this module and all below it."""
        check_flags(f"{type(self).__name__}.train", mode=mode)
        for m in self.modules():
            m.training = mode
        return self

    def eval(self) -> "Module":
        """Evaluation mode: dropout becomes the identity."""
        return self.train(False)

    # -- saving, loading, moving -----------------------------------------------------------------

    def state_dict(self) -> dict:
        """{name: host NumPy copy of the parameter} -- plain arrays, safe to save as .npz."""
        return {name: to_numpy(p.data).copy() for name, p in self.named_parameters()}

    def misfits(self, state: dict) -> list[str]:
        """How the arrays of ``state`` (name -> array) do not fit this model's parameters: each
        one of another shape (first: they say which sizes differ), missing, or unexpected, in
        one phrase each; [] if they fit."""
        params = dict(self.named_parameters())
        return ([f"{name}: saved {tuple(state[name].shape)}, model {tuple(p.shape)}"
                 for name, p in params.items()
                 if name in state and tuple(state[name].shape) != tuple(p.shape)]
                + [f"missing {name} {tuple(p.shape)}" for name, p in params.items()
                   if name not in state]
                + [f"unexpected {name} {tuple(state[name].shape)}" for name in state
                   if name not in params])

    def load_state_dict(self, state: dict) -> None:
        """Copy arrays into the parameters (cast to their dtype, moved to their device).

        Every name must be present, with the right shape and finite real numbers; otherwise one
        error names the mismatches (the first few, and how many more).
        """
        where = f"{type(self).__name__}.load_state_dict"
        if isinstance(state, Mapping) and not isinstance(state, dict):
            state = dict(state)                 # np.load's NpzFile of a saved state_dict()
        if not isinstance(state, dict):
            raise TypeError(f"{where}: state must be a dict {{name: array}} (or what np.load "
                            f"reads back from np.savez(file, **state_dict())); got "
                            f"{type(state).__name__}")
        not_arrays = [f"{name}: a {type(v).__name__}, not an array" for name, v in state.items()
                      if not is_array(v)]
        if not_arrays:
            raise ValueError(f"{where}: the state does not fit this model: " + some_of(not_arrays))
        params = dict(self.named_parameters())
        problems = self.misfits(state)
        # the dtype alone here, no pass over the numbers: NaN and inf are found after the cast
        problems += [f"{name}: {not_real_numbers(state[name])}" for name in params
                     if name in state and state[name].dtype.kind not in "fiu"]
        if problems:
            raise ValueError(f"{where}: the state does not fit this model: " + some_of(problems))
        # cast first, all of them, and check what the cast made, one pass over each: a NaN or an
        # inf saved, or a number beyond the parameter's dtype (1e300 is finite in float64 and inf
        # in float32); no parameter changes unless every one can
        with float_errors_ignored():                  # the overflow is reported just below
            cast = {name: to_device(state[name], backend=backend_of(p.data), dtype=p.data.dtype)
                    for name, p in params.items()}
        bad = [name for name in params if not_real_numbers(cast[name])]
        if bad:
            raise ValueError(f"{where}: the state does not fit this model: " + some_of([
                f"{name}: " + (not_real_numbers(state[name])
                               or f"holds values beyond {params[name].data.dtype}'s range")
                for name in bad]))
        for name, p in params.items():
            p.data = cast[name].copy()

    def to(self, backend: str | None = None, dtype=None) -> "Module":
        """Move every parameter to ``backend`` ("numpy" or "cupy"; None: stay) and/or cast it to
        ``dtype`` ("float32" or "float64"). Gradients are reset to zero and any cached forward
        state is dropped.
        """
        where = f"{type(self).__name__}.to"
        if backend is not None:                                  # before any parameter moves
            check_backend_name(backend, where)
        if dtype is not None:
            dtype = float_dtype_named(dtype, where)
        for p in self.parameters():
            p.data = to_device(p.data, backend=backend or backend_of(p.data), dtype=dtype)
            p.grad = get_array_module(p.data).zeros_like(p.data)
        for m in self.modules():
            m._cache = _NO_CACHE
        return self


def some_of(problems: list, most: int = 6) -> str:
    """The first ``most`` of ``problems``, and how many more: every weight of a model whose
    config was edited by hand made one line of 1,400 characters."""
    more = f"; and {len(problems) - most} more" if len(problems) > most else ""
    return "; ".join(problems[:most]) + more
