"""Will a training step fit in this machine's memory? Asked before the first step, so that
``minitf train`` refuses in one line what the kernel would otherwise kill minutes later, with no
word: the floor a step holds at least (minitf.cost.training_memory_floor) decides, and a step of
one window, traced, says what batch fits.
"""
from __future__ import annotations

from minitf.backend import backend_name, randint, rng_state, set_rng_state
from minitf.cost import (available_memory, decoder_window_numbers, recurrent_window_numbers,
                         training_memory_floor)
from minitf.models import RNNLM


def step_peak_bytes(model, ids, targets) -> int:
    """The most bytes NumPy holds at once, beyond what it held before, during one training step
    of ``model`` on ``ids`` and ``targets`` (a forward and a backward, no update): traced, not
    estimated. A first step beforehand makes what a model makes lazily; then the gradients are
    put back as they were, and the random stream (dropout draws from it), so the model and a
    training run it is part of are as they were."""
    import tracemalloc

    if not (callable(getattr(model, "loss", None)) and callable(getattr(model, "parameters", None))):
        raise TypeError(f"step_peak_bytes: model must be a minitf model, with loss(ids, targets); "
                        f"got {type(model).__name__}")
    grads = [p.grad.copy() for p in model.parameters()]     # held before: not in the peak
    stream = rng_state()
    started = False
    try:
        model.loss(ids, targets)[1]()
        started = not tracemalloc.is_tracing()     # someone else's tracing is left running
        if started:
            tracemalloc.start()
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        model.loss(ids, targets)[1]()
        return tracemalloc.get_traced_memory()[1] - before
    finally:                                       # out of memory in either step: as it was too
        if started:
            tracemalloc.stop()
        for p, grad in zip(model.parameters(), grads):
            p.grad[...] = grad
        set_rng_state(stream)


def refuse_a_step_beyond_memory(model, batch_size: int, context: int) -> None:
    """One line, not the kernel's silent kill minutes later, for a --batch-size or --context
    whose step cannot fit: refused only where even the floor of a step's memory exceeds what
    the machine has free (on NumPy; a GPU's memory is its own)."""
    free = available_memory() if backend_name() == "numpy" else None
    c, n = model.config, context
    window = (recurrent_window_numbers(c["vocab_size"], c["d_model"], c["d_hidden"], c["cell"], n)
              if isinstance(model, RNNLM) else
              decoder_window_numbers(c["vocab_size"], c["d_model"], c["n_layers"], c["d_ff"],
                                     c["n_heads"], n))
    needed = training_memory_floor(window, batch_size, model.num_parameters())
    if free is not None and needed > free:
        room = free - training_memory_floor(window, 0, model.num_parameters())  # beside weights
        fits = max(0, room // training_memory_floor(window, 1, 0))
        # the floor bounds what can fit; what does is measured: one window's step, traced
        # (1.4 to 9 × the floor: most where long contexts meet ALiBi or relative positions)
        ids = randint(0, c["vocab_size"], (1, n))
        try:
            one = step_peak_bytes(model, ids, ids) if fits else 0
        except MemoryError:              # a window that fits by the floor alone may not
            one = 0
        sure = room // one if one else 0                 # room > 0 where one was measured
        wanted = ("not one window fits: wanted a smaller model or --context" if not one else
                  f"wanted a --batch-size of at most {fits:,}, and {sure:,} or fewer by one "
                  f"window's step, measured now ({one / 2**20:.1f} MiB)" if sure else
                  f"wanted a --batch-size of at most {fits:,}, and not even 1 fits by one "
                  f"window's step, measured now ({one / 2**20:.1f} MiB): a smaller model or "
                  f"--context")
        raise ValueError(f"--batch-size {batch_size} × --context {n}: a training step of "
                         f"this model holds at least {needed / 2**30:.1f} GiB, and this machine "
                         f"has {free / 2**30:.1f} GiB free; {wanted}")
