"""Recurrent layers: the vanilla RNN and the LSTM, thin modules around minitf.functional's pairs.

    RNN:   h_t = tanh(x_t W_x + h_{t−1} W_h + b)              x: (b, n, d_in) -> H: (b, n, d_h)
    LSTM:  c_t = f ⊙ c_{t−1} + i ⊙ g,  h_t = o ⊙ tanh(c_t)   x: (b, n, d_in) -> H: (b, n, d_h)

The initial state is zero unless given; backward returns the gradient of x and of every initial
state, in the order the forward took them. W_x ~ N(0, 1/d_in) and W_h ~ N(0, 1/d_h), so that
each of x_t W_x and h_{t−1} W_h starts with about the variance of one feature of its input
(of x, or of h, whose entries lie in (−1, 1) and so vary less than 1).
"""
import math

import minitf.functional as F
from minitf.backend import get_array_module
from minitf.nn.module import Module
from minitf.nn.parameter import normal, zeros
from minitf.validate import check_int


class _Recurrent(Module):
    """What the RNN and the LSTM share: weights for ``n_gates`` stacked blocks, zero initial
    states."""

    n_gates = 1
    states = ("h0",)

    def __init__(self, d_in: int, d_h: int):
        where = type(self).__name__
        check_int(d_in, "d_in", where, what="the width of its input")
        check_int(d_h, "d_h", where, what="the width of its state")
        self.d_in, self.d_h = d_in, d_h
        self.W_x = normal(d_in, self.n_gates * d_h, std=1.0 / math.sqrt(d_in))
        self.W_h = normal(d_h, self.n_gates * d_h, std=1.0 / math.sqrt(d_h))
        self.b = zeros(self.n_gates * d_h)

    def _inputs(self, x, given):
        """x checked; each initial state as given, or zeros (b, d_h)."""
        self._check_input(x, "x", ("b", "n", ("d_in", self.d_in)))
        # the parameters' dtype: a model moved to float64 is not one of float_dtype()'s
        zero = get_array_module(x).zeros((x.shape[0], self.d_h), dtype=self.W_h.data.dtype)
        states = [zero if s is None else s for s in given]
        for name, s in zip(self.states, states):
            self._check_input(s, name, (("b", x.shape[0]), ("d_h", self.d_h)))
        return states

    def _backward(self, grads):
        """Adds (dW_x, dW_h, db), the last three gradients, into .grad; returns the inputs'."""
        *inputs, dW_x, dW_h, db = grads
        self.W_x.grad += dW_x
        self.W_h.grad += dW_h
        self.b.grad += db
        return tuple(inputs)


class RNN(_Recurrent):
    """The vanilla (Elman) RNN, tanh.   forward(x, h0=None) -> H;  backward(dH) -> (dx, dh0)"""

    def forward(self, x, h0=None):
        (h0,) = self._inputs(x, (h0,))
        H, cache = F.rnn(x, h0, self.W_x.data, self.W_h.data, self.b.data)
        self._save(cache)
        return H

    def backward(self, dH):
        return self._backward(F.rnn_backward(dH, self._pop_cache()))


class LSTM(_Recurrent):
    """The LSTM, gates i, f, g, o.   forward(x, h0=None, c0=None) -> H;  backward(dH) -> (dx, dh0, dc0)

    ``last_cell`` keeps c_n after each forward, for carrying the state on (generation).
    """

    n_gates = 4
    states = ("h0", "c0")
    last_cell = None             # c_n of the last forward; None before the first

    def forward(self, x, h0=None, c0=None):
        h0, c0 = self._inputs(x, (h0, c0))
        H, cache = F.lstm(x, h0, c0, self.W_x.data, self.W_h.data, self.b.data)
        C = cache[-1]                                     # (b, n, d_h): c_1 … c_n
        self.last_cell = C[:, -1] if C.shape[1] else c0   # (b, d_h): c_n (c0 after no steps)
        self._save(cache)
        return H

    def backward(self, dH):
        return self._backward(F.lstm_backward(dH, self._pop_cache()))
