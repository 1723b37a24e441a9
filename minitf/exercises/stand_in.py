"""Putting a learner's function where minitf looks up its own, and noting which ran.

Standing in means replacing the reference wherever it is looked up: for a functional op, every
minitf module attribute bound to it (``minitf.functional.softmax_backward``, the
``softmax_backward`` that minitf.functional.attention imported, ...); for a method, the class
attribute. Everything is put back afterwards, also when the learner's code raises.
"""
from __future__ import annotations

import functools
import sys
from contextlib import ExitStack, contextmanager

from minitf.exercises.catalogue import Exercise


@contextmanager
def standing_in(exercise: Exercise, function, helpers=None):
    """While the block runs, ``function`` is minitf's ``exercise`` wherever minitf looks it up,
    and each of ``helpers`` ({name: function}) the helper of that name (Exercise.helpers): a
    submitted file's own, which other minitf code calls too (relative attention calls
    attention_backward's two steps)."""
    # as the class or module holds it: wrapped in Module's check, or in gradient_of's
    swaps = [(vars(exercise.owner)[exercise.attribute], function)]
    swaps += [(exercise.helpers[name], helper) for name, helper in (helpers or {}).items()]
    if exercise.is_method:
        places = [(exercise.owner, exercise.attribute, *swaps[0])]
    else:
        modules = [m for name, m in list(sys.modules.items())
                   if m is not None and (name == "minitf" or name.startswith("minitf."))]
        places = [(m, attr, reference, new) for reference, new in swaps
                  for m in modules for attr, value in list(vars(m).items())
                  if value is reference]
    try:
        for owner, attr, _, new in places:
            setattr(owner, attr, new)
        yield [(owner, attr) for owner, attr, _, _ in places]
    finally:
        for owner, attr, reference, _ in places:
            setattr(owner, attr, reference)


@contextmanager
def noting_calls(exercises, noted: set, namespaces=()):
    """While the block runs, each of ``exercises`` adds its name to ``noted`` whenever it is
    called, and then runs as it is: looked up in minitf, or in one of ``namespaces`` (the
    globals of a learner's file, loaded as a module of its own, which bound minitf's functions
    when it was loaded). Inside a student's own copy of minitf every other exercise of the
    homework is the student's answer too: this tells which of them a failing case ran, for one
    that failed its own checks may be what fails the case, not the exercise graded."""
    def noting(function, name):
        @functools.wraps(function)
        def called(*args, **kwargs):
            noted.add(name)
            return function(*args, **kwargs)
        return called

    swapped = []                                  # (namespace, name, what it held)
    with ExitStack() as stack:
        for exercise in exercises:
            current = vars(exercise.owner)[exercise.attribute]
            wrapper = noting(current, exercise.name)
            stack.enter_context(standing_in(exercise, wrapper))
            for space in namespaces:
                for name, value in list(space.items()):
                    if value is current:
                        swapped.append((space, name, value))
                        space[name] = wrapper
        try:
            yield
        finally:
            for space, name, value in swapped:
                space[name] = value
