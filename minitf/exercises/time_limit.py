"""A time limit for a learner's code: an answer that loops forever must cost its own exercise,
not the grading of every other one (nor, on Gradescope, the whole run and every score in it).

    with time_limit("softmax_backward"):          # TookTooLong after EXERCISE_SECONDS
        ...

The limit is a POSIX alarm (SIGALRM): the interpreter stops the learner's Python between two of
its steps and raises TookTooLong where it was, so the traceback shows the line that loops. A
single NumPy call that never returns cannot be interrupted this way, nor code that catches the
TookTooLong and runs on: GRACE_SECONDS past the limit a watchdog thread ends the process, in one
line (a grading with --json takes that as an exercise that ended it, and --resume grades the
rest). Where there is no alarm (Windows, or a thread other than the main one) the block runs
without a limit. Inside the block ``os._exit`` raises ExitRefused instead of ending the process:
called by the learner's code, it ended a check with exit status 0 and not a word. Limits do not
nest: the grader sets one at a time. A Budget bounds a whole grading, as Gradescope's own timeout does: what is left of it shortens the last exercises'
limits.
"""
from __future__ import annotations

import math
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager

from minitf.backend import settings_restored

EXERCISE_SECONDS = 60      # one exercise, every case: all but a composite's take under 1 s
# A composite exercise (level 5: a block's or a whole model's chain): its checks difference
# every weight, 20 s for Transformer.backward on a core of an AMD EPYC (benchmarks/RESULTS.md,
# thirtieth entry), and Gradescope runs a grader on half a virtual CPU by default
COMPOSITE_SECONDS = 240
TRACE_SECONDS = 10         # one registry case's forward and backward, run once to trace calls
# Past the limit, the time the block has to end before the process is ended: code that catches
# TookTooLong (`except BaseException:` inside a loop), or one NumPy call no alarm interrupts,
# would otherwise run on and take every later exercise's time. Unwinding takes well under 1 s.
GRACE_SECONDS = 10
ENDED_STATUS = 124         # the exit status then, as timeout(1)'s


def seconds_for(level: int | None) -> float:
    """How long an exercise of ``level`` (None: an instructor's own) may run before it is
    stopped as a loop that never ends; read when asked, so that a changed limit holds at once."""
    return COMPOSITE_SECONDS if level == 5 else EXERCISE_SECONDS


class ExitRefused(SystemExit):
    """Raised by ``os._exit`` inside a time_limit block. A SystemExit, which the grader already
    takes for a check that the learner's code ended, as it takes ``exit()``."""


_real_exit = os._exit               # the watchdog's, which must still end the process


def _exit_refused(status=0):
    raise ExitRefused(f"your code called os._exit({status!r}), which would end the grading at "
                      f"once, with nothing said; wanted a return (or an error raised)")


@contextmanager
def _no_hard_exit():
    previous, os._exit = os._exit, _exit_refused
    try:
        yield
    finally:
        os._exit = previous


class TookTooLong(BaseException):
    """Raised inside the block when its time is up. A BaseException, as KeyboardInterrupt is, so
    that the grader's ``except Exception`` around each case does not take it for that case's
    error and go on to the next case, which would loop again with no alarm left."""


@contextmanager
def time_limit(what: str, seconds: float | None = None, why: str = ""):
    """Run the block for at most ``seconds`` (EXERCISE_SECONDS as it is when called); then
    TookTooLong, naming ``what``, and ``why`` the limit is what it is where a caller set a
    shorter one (what was left of a whole grading's budget)."""
    seconds = EXERCISE_SECONDS if seconds is None else seconds
    main = threading.current_thread() is threading.main_thread()
    if not hasattr(signal, "setitimer") or not main:       # an alarm reaches the main thread only
        with _no_hard_exit():
            yield
        return

    stopped = threading.Event()
    # A thread, which needs no signal: it ends the process inside a NumPy call that lets go of
    # the interpreter (a matrix product does), where the alarm's TookTooLong waits for its end.
    watchdog = threading.Timer(seconds + GRACE_SECONDS, _end_the_process,
                               (what, seconds, stopped))
    watchdog.daemon = True

    ending = False

    def stop(signum, frame):
        if ending:                # due as the block ended: it ended in time, and its cleanup,
            return                # cut short, would leave the watchdog to end the process
        stopped.set()
        raise TookTooLong(f"{what} ran for more than {seconds:.3g} s and was stopped " +
                          (why or "(a loop that never ends?)"))
    previous = signal.signal(signal.SIGALRM, stop)
    # outermost, so that minitf's settings and NumPy's warnings are put back once no alarm can
    # land any more: a stop between a setting and its ``with`` leaves it (backend.settings_restored)
    with settings_restored():
        try:                      # armed inside: a limit of 1 ms can be up before the try begins
            watchdog.start()
            signal.setitimer(signal.ITIMER_REAL, seconds)
            with _no_hard_exit():
                yield
        finally:
            ending = True
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            watchdog.cancel()


def _end_the_process(what: str, seconds: float, stopped: threading.Event) -> None:
    """The block outlived its limit by GRACE_SECONDS: one line, and the process ends. A grading
    with --json has written its results with that exercise at 0 before it ran, and
    run_autograder grades the rest in a new process (--resume)."""
    why = ("its code caught the stop: an `except BaseException` or a bare `except:` in a loop?"
           if stopped.is_set() else "one call that no stop interrupts: a NumPy call on huge "
                                    "arrays?")
    sys.stderr.write(f"minitf: {what} ran on for {GRACE_SECONDS} s past its limit of "
                     f"{seconds:.3g} s ({why}); this process ends here\n")
    sys.stderr.flush()
    _real_exit(ENDED_STATUS)


class Budget:
    """The time a whole grading may take, counted from ``started`` (time.time(), so that a
    grading taken up by a new process counts from the first one's start): on Gradescope, a run
    past the assignment's timeout is killed and scores 0 with nothing shown, however many
    exercises it had graded. Each exercise runs for at most its own limit (seconds_for) or what
    is left, whichever is less; once nothing is left, the rest are not graded. ``seconds``
    None: no budget.
    """

    def __init__(self, seconds: float | None = None, started: float | None = None):
        self.seconds = seconds
        self.started = time.time() if started is None else started

    def left(self) -> float:
        if self.seconds is None:
            return math.inf
        return self.seconds - (time.time() - self.started)

    def limit(self, seconds: float) -> tuple[float, str]:
        """(seconds, why) for the time_limit of the next exercise, whose own limit is
        ``seconds``."""
        left = self.left()
        if left >= seconds:
            return seconds, ""
        return max(left, 1e-3), f"when the grading's budget of {self.seconds:g} s ran out"

    def not_reached(self, name: str) -> str:
        return (f"{name} was not graded: the grading's budget of {self.seconds:g} s ran out before "
                f"it (an answer that never returns takes up to {EXERCISE_SECONDS} s of it, or "
                f"{COMPOSITE_SECONDS} s for a composite one, level 5)")
