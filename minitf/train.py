"""The training loop: batches in, a loss, the hand-written backward, clipping, an optimizer step.

    for step in 1 … steps:
        x…, y = next batch                         (inputs, targets)
        loss, backward = model.loss(x…, y)         forward + cross-entropy
        model.zero_grad(); backward()              every p.grad = dL/dp
        clip_grad_norm(…); optimizer.lr = schedule(step); optimizer.step()

A Trainer also validates every ``eval_every`` steps, keeps the loss history, shows a progress bar
(loss, learning rate, tokens/s), and stops with TrainingDiverged, naming the step,
  - as soon as a loss or a gradient becomes NaN or inf (naming the first such parameter), or
  - once warm-up is over, when the mean loss of the last ``divergence_window`` (10) steps is above
    ``divergence_factor`` (3) × log V, the loss of guessing uniformly among the V classes.
    Every model starts near log V; a healthy run only goes down from there, and a loss three
    times as high means it gives the right answer a probability near V^-3 on average, far worse
    than not having learned at all: the learning rate is too high and the weights are blowing
    up -- often on their way to inf and NaN, at times stuck at a huge finite loss for good.
Setting ``stop_requested`` (minitf train does on Ctrl-C and SIGTERM) ends ``fit`` after the step
under way: a step cut in half, some parameters updated and others not, could not be resumed
exactly.
"""
from __future__ import annotations

import inspect
import math
import signal
import sys
import time
from contextlib import contextmanager
from typing import Callable

from minitf.backend import float_errors_ignored, get_array_module
from minitf.nn import no_grad
from minitf.optim import Optimizer, clip_grad_norm, grad_norm
from minitf.validate import check_flags, check_int, check_real, is_real_number


def _check_trainer(model, optimizer, batches, schedule, evaluate, eval_every, clip, save,
                   save_every) -> None:
    """The Trainer's arguments, checked where they are given, not at the step that first uses
    them -- or never: an optimizer of another model's parameters would train nothing."""
    where = "Trainer"
    if not (callable(getattr(model, "loss", None)) and hasattr(model, "parameters")):
        raise TypeError(f"{where}: model is a {type(model).__name__}; wanted a model with a "
                        f"loss(inputs…, targets) method, such as minitf.models.DecoderLM")
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{where}: optimizer is a {type(optimizer).__name__}; wanted a "
                        f"minitf.optim optimizer, e.g. AdamW(model)")
    if not {id(p) for p in model.parameters()} & {id(p) for p in optimizer.params}:
        raise ValueError(f"{where}: optimizer holds none of model's parameters (was it built "
                         f"for another model?); wanted e.g. {type(optimizer).__name__}(model)")
    for name, value in (("batches", batches), ("schedule", schedule), ("evaluate", evaluate),
                        ("save", save)):
        if not (callable(value) or value is None):   # batches None: a trainer to save or resume
            raise TypeError(f"{where}: {name} is a {type(value).__name__}; wanted a function "
                            f"or None")
        if value is not None:
            _check_arguments(value, name, 1 if name == "schedule" else 0, where)
    check_int(eval_every, "eval_every", where, what="steps between validations")
    check_int(save_every, "save_every", where, low=0,
              what="steps between saves (0: none before the end)")
    if save_every and save is None:         # the run would be saved never, and nothing said
        raise ValueError(f"{where}: save_every={save_every} but save is None; wanted a function "
                         f"that writes a checkpoint (or save_every=0)")
    if clip is not None:
        check_real(clip, "clip", where, low=0)


def _check_arguments(function, name: str, count: int, where: str) -> None:
    """TypeError unless ``function`` can be called with ``count`` positional arguments: a
    schedule is called with the step, the others with nothing. An evaluate given where the
    schedule goes (Trainer(m, o, batches, evaluate)) failed only at the first step, with
    "<lambda>() takes 0 positional arguments but 1 was given". Lenient: a function whose
    signature Python cannot read (some built-ins) is taken on trust."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*range(count))
    except TypeError:
        wanted = ("one argument, the step (step -> learning rate); a function of the validation "
                  "loss goes in evaluate=" if count else f"no argument: it is called as {name}()")
        raise TypeError(f"{where}: {name} takes {signature}; wanted {wanted}") from None


class TrainingDiverged(RuntimeError):
    """The loss or a gradient became NaN or infinite, or the loss far above a uniform guess's."""


class Trainer:
    """Train ``model`` with ``optimizer`` on ``batches()``, a function returning (inputs…, targets).

    batches       () -> (inputs…, targets), a new batch at each call, passed to
                  ``model.loss(*inputs, targets)``; for a language model, e.g.
                  ``lambda: data.random_windows(train_ids, 32, 64)``
    schedule      step -> learning rate (see minitf.optim), asked for steps 1, 2, …;
                  None keeps optimizer.lr
    evaluate      () -> validation loss (float), run every ``eval_every`` steps and at the end
    save          () -> None, a checkpoint, run every ``save_every`` steps before the last
                  (a run killed at any moment loses at most save_every steps); the last step's
                  checkpoint, or a stopped run's, is the caller's to save. So save_every=0
                  (the default) with a save means no save during the run, only the caller's
                  at the end: ``minitf train --save-every 0``, which passes its save always
    clip          max global gradient norm (None: no clipping)
    The divergence rule (see the module docstring) reads ``model.chance_loss`` (log V, which
    Model.loss records) and the schedule's ``warmup``, if it has one.
    State worth saving (see minitf.checkpoint): ``step``, ``history``, the optimizer, the RNG.
    """

    divergence_factor = 3.0      # × log V: a mean loss above this is divergence, not slow learning
    divergence_window = 10       # steps averaged: one unlucky batch is not divergence

    def __init__(self, model, optimizer, batches: Callable[[], tuple], schedule=None,
                 evaluate: Callable[[], float] | None = None, eval_every: int = 100,
                 clip: float | None = 1.0, save: Callable[[], None] | None = None,
                 save_every: int = 0):
        _check_trainer(model, optimizer, batches, schedule, evaluate, eval_every, clip, save,
                       save_every)
        self.model, self.optimizer, self.batches = model, optimizer, batches
        self.schedule, self.evaluate, self.eval_every, self.clip = schedule, evaluate, eval_every, clip
        self.save, self.save_every = save, save_every
        self.step, self.stop_requested = 0, False
        self.saved_step = None          # the step of the last checkpoint fit() saved
        self.tokens_per_second = None   # of the last fit()
        self.history = {"step": [], "loss": [], "lr": [], "val_step": [], "val_loss": []}

    def train_step(self) -> tuple[float, int]:
        """One optimisation step. -> (training loss, number of target tokens)."""
        lr = None if self.schedule is None else self._scheduled_lr(self.step + 1)
        *inputs, targets = self._next_batch()
        self.step += 1                  # the step under way, which a divergence names
        self.model.train()
        self.model.zero_grad()
        # A diverging step overflows (inf, then inf − inf = NaN) deep inside the forward and
        # backward; NumPy would warn at each place. Every such number reaches the loss or the
        # gradient norm, which are checked right below, so the warnings would only bury the
        # TrainingDiverged message that names the step.
        try:
            with float_errors_ignored():
                loss, backward = self.model.loss(*inputs, targets)
                backward()
                norm = (clip_grad_norm(self.model, self.clip) if self.clip is not None
                        else grad_norm(self.model))
        except BaseException:   # a batch the model refused, or Ctrl-C mid-step: no step was
            self.step -= 1      # taken, none is counted (else a fit() run again trains one step
            raise               # fewer, off the schedule)
        if not (math.isfinite(loss) and math.isfinite(norm)):
            raise TrainingDiverged(self._diagnose(loss))
        self._check_far_above_chance(loss)
        if lr is not None:
            self.optimizer.lr = lr
        with float_errors_ignored():          # huge steps: the next forward reports them
            self.optimizer.step()
        self.history["step"].append(self.step)
        self.history["loss"].append(loss)
        self.history["lr"].append(self.optimizer.lr)
        return loss, int(targets.size)

    def _next_batch(self) -> tuple:
        """batches(), refused in one line unless it is (inputs…, targets): a batches() that lost
        its ``return`` gives None, and one array would be split into its rows."""
        batch = self.batches()
        if not isinstance(batch, (tuple, list)) or len(batch) < 2:
            got = ("None" if batch is None else f"a {type(batch).__name__} of {len(batch)}"
                   if isinstance(batch, (tuple, list)) else f"one {type(batch).__name__}")
            raise TypeError(f"Trainer: batches() returned {got}; wanted a tuple (inputs…, "
                            f"targets), e.g. (x, y) for a language model")
        return batch

    def _scheduled_lr(self, step: int) -> float:
        """The schedule's learning rate for ``step``, checked before the step starts: a bad one
        was the optimizer's error, after the step had been counted and its lr set."""
        lr = self.schedule(step)
        check_real(lr, f"schedule({step})", "Trainer", low=0, low_open=False)
        return lr

    def _check_far_above_chance(self, loss: float) -> None:
        """TrainingDiverged if, after warm-up, the mean of the last divergence_window losses
        (this step's included) is above divergence_factor × log V."""
        chance, past, n = getattr(self.model, "chance_loss", None), self.history["loss"], \
            self.divergence_window
        if chance is None or self.step <= getattr(self.schedule, "warmup", 0) or len(past) < n - 1:
            return
        window = past[len(past) - (n - 1):] + [loss]
        mean, limit = sum(window) / len(window), self.divergence_factor * chance
        if mean > limit:
            classes = round(math.exp(chance))
            raise TrainingDiverged(
                f"training diverged at step {self.step}: the mean loss of the last {len(window)} "
                f"steps is {mean:.4g}, more than {self.divergence_factor:g} × log({classes}) = "
                f"{limit:.3g}, where log({classes}) = {chance:.3g} is the loss of guessing "
                f"uniformly among the {classes} classes (try a lower learning rate)")

    def _diagnose(self, loss: float) -> str:
        for name, p in self.model.named_parameters():
            if p.grad is not None and not bool(get_array_module(p.grad).isfinite(p.grad).all()):
                return (f"training diverged at step {self.step}: loss {loss}; the first parameter "
                        f"whose gradient is not finite is {name} {tuple(p.shape)} (try a lower "
                        f"learning rate or gradient clipping)")
        return f"training diverged at step {self.step}: the loss is {loss}"

    def validate(self) -> float:
        """The validation loss: ``evaluate()`` run with the model in eval mode (dropout off; the
        next ``train_step`` turns it back on) and under minitf.nn.no_grad() (no backward follows:
        its forwards keep nothing), recorded in ``history``."""
        if self.evaluate is None:
            raise ValueError("Trainer.validate: evaluate is None; wanted a function returning the "
                             "validation loss, given when the Trainer was made")
        self.model.eval()
        with no_grad():
            val = self.evaluate()
        if not is_real_number(val):
            raise TypeError(f"Trainer.validate: evaluate returned {val!r}; wanted the validation "
                            f"loss, a number")
        val = float(val)
        if not math.isfinite(val):          # kept in the history, it would hide in the mean
            raise TrainingDiverged(f"training diverged at step {self.step}: the validation loss "
                                   f"(evaluate's) is {val}; wanted a finite number")
        self.history["val_step"].append(self.step)
        self.history["val_loss"].append(val)
        return val

    def _drop_the_closing_validation(self) -> None:
        """A fit that goes on past where the last one ended: that one's closing validation, off
        the every-eval_every grid, was no point of the longer run, and is taken off the history
        (so fit(20) then fit(40), or a finished run resumed, keeps the history of fit(40))."""
        h = self.history
        if h["val_step"] and h["val_step"][-1] == self.step and self.step % self.eval_every:
            del h["val_step"][-1], h["val_loss"][-1]

    def fit(self, steps: int, progress: bool = True) -> dict:
        """Train until ``self.step == steps`` (a resumed trainer continues where it stopped), or
        until ``stop_requested`` is set. ``progress`` shows the loss, lr, tokens/s and the
        validation loss, if any, on standard error: on a terminal as a bar redrawn in place;
        written to a file or a pipe (``minitf train 2> log``, or ``> log 2>&1``), where a redrawn
        bar is one endless line, as a line every ``eval_every`` steps.
        -> ``self.history``, a dict of lists: ``step``, ``loss`` and ``lr`` have an entry per
        training step; ``val_step`` and ``val_loss`` one per validation (every ``eval_every``
        steps and at the last)."""
        check_int(steps, "steps", "Trainer.fit", low=0, what="the step to train until")
        check_flags("Trainer.fit", progress=progress)
        if self.step > 0 and steps <= self.step:    # fit(3) run again after fit(3) trained nothing
            more = max(steps, 1)
            raise ValueError(f"Trainer.fit: steps={steps} is the step to train until, and "
                             f"{self.step} are done; wanted more, e.g. fit({self.step + more}) "
                             f"for {more} more")
        if self.batches is None and self.step < steps:
            raise ValueError("Trainer.fit: batches is None; wanted a function returning "
                             "(inputs…, targets), given when the Trainer was made")
        self._drop_the_closing_validation()
        from tqdm import tqdm    # here, not at the top: grading a homework needs only NumPy
        live = progress and sys.stderr.isatty()          # where tqdm draws
        bar = tqdm(total=steps, initial=self.step, disable=not live, unit="step",
                   dynamic_ncols=True)
        tokens, start = 0, time.perf_counter()
        while self.step < steps and not self.stop_requested:
            loss, n_tokens = self.train_step()
            tokens += n_tokens
            postfix = {"loss": f"{loss:.3f}", "lr": f"{self.optimizer.lr:.2e}",
                       "tok/s": f"{tokens / (time.perf_counter() - start):,.0f}"}
            due = self.step % self.eval_every == 0 or self.step == steps
            if self.evaluate is not None and due:
                postfix["val"] = f"{self.validate():.3f}"
            if progress and not live and due:
                print(f"step {self.step}/{steps}  " + "  ".join(f"{k} {v}" for k, v in
                                                               postfix.items()),
                      file=sys.stderr, flush=True)
            if self.save is not None and self.save_every and self.step % self.save_every == 0 \
                    and self.step < steps:      # the last step's checkpoint is the caller's
                self.save()
                self.saved_step = self.step
            bar.set_postfix(postfix, refresh=False)
            bar.update(1)
        bar.close()
        self.tokens_per_second = tokens / max(time.perf_counter() - start, 1e-9)
        return self.history


STOPPING_SIGNALS = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


class StoppedAtOnce(KeyboardInterrupt):
    """A second Ctrl-C or SIGTERM: the step under way, or whatever ran, is abandoned. ``signum``
    is the signal's number (the exit status is 128 + it)."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted ({STOPPING_SIGNALS.get(signum, signum)}) a second time: "
                         f"stopped at once")
        self.signum = signum


@contextmanager
def stop_on_signals(trainer: Trainer):
    """Ctrl-C (SIGINT), or the SIGTERM that timeout, docker stop and Slurm send, asks the trainer
    to stop after the step under way (``trainer.stop_requested`` then names the signal); a
    second one stops at once. Outside the main thread Python delivers no signals, so there is
    nothing to catch."""
    def request_stop(signum, frame):
        if trainer.stop_requested:
            raise StoppedAtOnce(signum)
        trainer.stop_requested = signum
    previous = {}
    try:
        for signum in STOPPING_SIGNALS:
            previous[signum] = signal.signal(signum, request_stop)
    except ValueError:
        pass
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
