"""A time limit for a learner's code: an answer that loops forever must cost its own exercise,
not the grading of every other one (nor, on Gradescope, the whole run and every score in it).

    with time_limit("softmax_backward"):          # TookTooLong after EXERCISE_SECONDS
        ...

The limit is a POSIX alarm (SIGALRM): the interpreter stops the learner's Python between two of
its steps and raises TookTooLong where it was, so the traceback shows the line that loops. A
single NumPy call that never returns cannot be interrupted this way, and where there is no alarm
(Windows, or a thread other than the main one) the block runs without a limit. Limits do not
nest: the grader sets one at a time.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

EXERCISE_SECONDS = 60      # one exercise, every case: the slowest (a whole model) takes a few s
TRACE_SECONDS = 10         # one registry case's forward and backward, run once to trace calls


class TookTooLong(BaseException):
    """Raised inside the block when its time is up. A BaseException, as KeyboardInterrupt is, so
    that the grader's ``except Exception`` around each case does not take it for that case's
    error and go on to the next case, which would loop again with no alarm left."""


@contextmanager
def time_limit(what: str, seconds: float | None = None):
    """Run the block for at most ``seconds`` (EXERCISE_SECONDS as it is when called); then
    TookTooLong, naming ``what``."""
    seconds = EXERCISE_SECONDS if seconds is None else seconds
    main = threading.current_thread() is threading.main_thread()
    if not hasattr(signal, "setitimer") or not main:       # an alarm reaches the main thread only
        yield
        return

    def stop(signum, frame):
        raise TookTooLong(f"{what} ran for more than {seconds:g} s and was stopped (a loop that "
                          f"never ends?)")
    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
