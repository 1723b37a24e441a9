"""
Your turn: write a backward pass and let minitf grade it
========================================================

Lesson 05 derived softmax's backward pass and checked it by finite differences. Now the pen is
yours: minitf hands you one of its own backward passes with the body cut out, you write the body,
and minitf grades it with the gradient checks it runs on itself. A script cannot wait for you to
type, so this lesson plays the student once, in a scratch folder that vanishes at the end: start
the ``softmax_backward`` exercise, check a wrong body, read the failing report, fix the body, see
it pass. The last cell tells you how to do the same at your own keyboard.

Run it: ``minitf lesson 19`` (a few seconds), or as a plain script,
``python lessons/19_your_first_exercise.py``.
"""

# %%
import contextlib
import io
import tempfile
from pathlib import Path

import numpy as np

import minitf.functional as F
from minitf import backend, cli, exercises, gradcheck, gradcheck_cases, viz
from minitf.exercises.starter import FENCE

backend.precision("float64")      # exact arithmetic, so every printed digit can be checked
backend.seed(0)


def minitf_command(*args):
    """Run ``minitf ARGS`` inside this process, as a shell would: (what it prints, exit status)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = cli.main(list(args))
    return printed.getvalue(), status


# %% [markdown]
# The exercises
# -------------
#
# Every exercise is one of minitf's own backward passes, from a one-line ReLU to a whole
# Transformer. The catalogue lists them easiest first; for each it knows what the forward
# computes, what the exercise teaches, the mistake learners make most often, and which of
# minitf's gradient checks grade it. That last column is not written by hand: minitf finds it by
# running every check once and watching which backward each one calls.

# %%
catalogue = exercises.EXERCISES
print(f"{'#':>2}  {'exercise':36} {'level':12} graded by")
for number, exercise in enumerate(catalogue, 1):
    cases = exercises.grading_cases(exercise)
    print(f"{number:2}  {exercise.name:36} {exercise.level} {exercises.LEVELS[exercise.level]:10} "
          f"{len(cases)} check{'s' * (len(cases) > 1)}")
assert [e.level for e in catalogue] == sorted(e.level for e in catalogue), "easiest first"
assert all(exercises.grading_cases(e) for e in catalogue), "every exercise is graded by a check"

ours = exercises.find("softmax_backward")
graded_by = exercises.grading_cases(ours)
calls_it = exercises.closure(ours)
print(f"\n{ours.name}\n  teaches      {ours.teaches}\n  classic slip {ours.mistake}\n"
      f"  graded by    {graded_by}")
print(f"  {len(calls_it)} of minitf's {len(gradcheck_cases.CASES)} checks call it somewhere "
      "(attention, every attention layer, every model)")
assert graded_by == ("softmax", "softmax, masked entries and a fully masked row",
                     "softmax, along axis 1 of three"), graded_by
assert len(calls_it) > 10 * len(graded_by), "softmax_backward sits under most of minitf"
print(f"✓ {len(catalogue)} exercises, easiest first; softmax_backward is graded by three checks")

# %% [markdown]
# How grading works
# -----------------
#
# Grading runs minitf's own gradient checks with *your* function standing in for minitf's: for
# the duration of the check, every place in minitf that looks up ``softmax_backward`` finds
# yours. Everything else (the forward, every other backward pass) stays minitf's own, so a
# failure is always in the file being checked, and an unfinished exercise never fails another.
# Each check is the one lesson 05 took apart, and one pass more:
#
# * float64, and central differences with h = 1e-6 as the reference gradient;
# * a random upstream gradient g (never all ones: for softmax, g = 1 makes the true gradient 0,
#   and a wrong backward can hide behind it), and a second random g if a tensor fails, to see
#   whether your answer changes with it at all;
# * different sizes on every axis of the input, here (2, 3, 5), so that an axis mixed up with
#   another gives the wrong shape instead of a lucky broadcast;
# * one relative error per tensor, passing at 1e-6;
# * then each case that passed runs once more in float32, minitf's default precision, where
#   each gradient must keep its input's dtype: an array made without ``dtype=``
#   (``np.zeros(shape)``) or a NumPy scalar like ``np.sqrt(2 / np.pi)`` is float64, turns a
#   float32 model's gradients float64, and shows in no float64 check.

# %%
def placeholder(dp, cache):       # stands in for a moment, to show where minitf looks it up
    return dp


minitfs_own = F.softmax_backward
with exercises.standing_in(ours, placeholder) as places:
    swapped = sorted(f"{module.__name__}.{name}" for module, name in places)
    inside = F.softmax_backward is placeholder
print("while your file is graded, these names point at your function:", *swapped, sep="\n  ")
shape = gradcheck_cases.build("softmax").inputs["x"].shape
print(f"the input of the 'softmax' check: {shape}")
assert inside and "minitf.functional.attention.softmax_backward" in swapped, \
    "standing in replaces every lookup, also the one inside attention"
assert F.softmax_backward is minitfs_own, "afterwards minitf's own is back"
assert len(set(shape)) == len(shape), f"every axis of the check has its own size, got {shape}"
print("✓ your function stands in everywhere minitf calls softmax_backward, then is taken out")

# %% [markdown]
# Start: the file you write in
# ----------------------------
#
# ``minitf exercise start softmax_backward`` writes one file. It holds the signature of minitf's
# function, what the arguments hold and what must come back, the forward exactly as minitf
# writes it, a hint, and a body that only raises ``NotImplementedError``. Your code goes between
# the two fence lines. Here is the whole file.

# %%
workdir = tempfile.TemporaryDirectory()                 # a scratch folder, removed at the end
said, status = minitf_command("exercise", "start", "softmax_backward", "--dir", workdir.name)
path = Path(workdir.name) / ours.filename
starter = path.read_text(encoding="utf-8")
print(starter)
for piece in ("def softmax_backward(dp, cache):", ours.equation, "Hint:",
              'raise NotImplementedError("softmax_backward: not written yet")',
              FENCE.format("START", ours.name), 'EXERCISE = "softmax_backward"'):
    assert piece in starter, f"the starter file should contain {piece!r}"
assert status == 0 and said.startswith("wrote"), said

report, status = minitf_command("exercise", "check", str(path))
print(report)
assert status == 1 and "not written yet" in report, "an untouched file is reported as unwritten"
print("✓ the starter: signature, forward, hint, an empty body; checking it says 'not written yet'")


# %%
def write_body(body):
    """Replace what stands between the two fence lines, as you would in your editor."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if FENCE.format("START", ours.name) in line)
    end = next(i for i, line in enumerate(lines) if FENCE.format("END", ours.name) in line)
    lines[start + 1:end] = ["    " + line for line in body.strip().splitlines()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def check(body):
    """Write ``body``, run ``minitf exercise check``; also keep the per-tensor rows to plot."""
    write_body(body)
    report, status = minitf_command("exercise", "check", str(path))
    result = exercises.grade(*exercises.load(path), path)
    print(report)
    assert status == (0 if result.passed else 1), "exit status 0 exactly when every tensor passes"
    return report, status, result


# %% [markdown]
# Attempt 1: treat softmax like an element-wise function
# ------------------------------------------------------
#
# For ReLU or GELU each output depends only on its own input, and the backward is dp times a
# local slope. A first attempt often reads softmax the same way, with the sum in the denominator
# taken as a constant S: then p_i = exp(x_i) / S differentiates like exp itself, ∂p_i/∂x_i = p_i,
# and the backward becomes p ⊙ dp. Check it.

# %%
attempt_1 = """
p, axis = cache
return p * dp
"""
report, status, result_1 = check(attempt_1)
assert status == 1 and not result_1.passed, "p ⊙ dp must fail"
assert [r.passed for r in result_1.rows] == [False] * 3, "all three checks should fail"
assert all(0.05 < r.error < 1 for r in result_1.rows), "a wrong formula scores 1e-1-ish, not 1e-5"
assert f"the classic mistake here: {ours.mistake}" in report, "the hint names the classic slip"
print("✓ attempt 1 fails all three checks, and the hint names the missing term")

# %% [markdown]
# Reading the report
# ------------------
#
# Take it line by line:
#
# * The header says what ran: your ``softmax_backward`` in place of minitf's, float64, central
#   differences, a random upstream gradient, and the rerun in float32 that checks dtypes only.
# * The table has one row per checked tensor. A relative error near 1e-1 is not "almost right":
#   a correct backward lands near 1e-10, so anything above 1e-6 is a wrong formula, not rounding.
# * ``worst entry x[...]: yours …, numeric …`` is the one number where your gradient and the
#   finite differences disagree most, and ``30 of 30 entries off`` says the error is everywhere,
#   not at one edge case. In the masked check 9 of 15 are off: at the six masked entries p = 0,
#   and a body of the form p ⊙ (…) gives the right 0 there whatever is inside.
# * The hint: your answer did change with the upstream gradient, and it is not the right answer
#   times a constant, so the grader falls back on the mistake this exercise is known for: the
#   term through the normalising sum is missing.
#
# The report's numbers can be rebuilt by hand. The difference between yours and the truth is::
#
#     yours_i − truth_i = p_i · s,      s = Σ_j dp_j p_j     (one number per row)
#
# the same s in every entry of a row, times p_i. So the worst entry sits where a large p_i meets
# a large s: a signature of one term forgotten for the whole row.

# %%
case = gradcheck_cases.build("softmax")
run = gradcheck.run_backward(case)                  # the check's forward and its random g
x, g = case.inputs["x"], run.g                      # (2, 3, 5) each
p, cache = F.softmax(x)
_, attempt = exercises.load(path)                   # the function in the file, as graded
yours, truth = attempt(g.copy(), cache), F.softmax_backward(g, cache)   # truth: minitf's own
worst = np.unravel_index(np.abs(yours - truth).argmax(), x.shape)
at = "[" + ", ".join(str(int(i)) for i in worst) + "]"   # written as the report writes it
s = (g * p).sum(axis=-1, keepdims=True)             # (2, 3, 1): Σ_j dp_j p_j per row
print(f"worst entry x{at}: yours {yours[worst]:.6g}, truth {truth[worst]:.6g}")
assert f"x{at}: yours {yours[worst]:.6g}, numeric" in report, \
    "the report's worst entry and 'yours' are this file's p ⊙ dp at the largest difference"
assert abs(result_1.rows[0].error - gradcheck.relative_error(yours, truth)) < 1e-8, \
    "the table's error is max |yours − truth| / (max |yours| + max |truth|)"
assert np.allclose(yours - truth, p * s, atol=1e-15), "the missing piece is exactly p ⊙ Σ dp·p"
print("✓ the report, rebuilt: the error is p_i times one row sum s, the same in a whole row")

# %% [markdown]
# Other slips, other hints
# ------------------------
#
# The hint is not always the catalogue's. The grader looks for signatures, most specific first:
# a gradient of all zeros (did you return it?); the same answer for two different upstream
# gradients (it ignores dp); the right answer times a constant (a missing scale, or a flipped
# sign); the right numbers transposed; and only then the exercise's classic mistake. Two slips
# that are common with softmax show the point:
#
# * the sigmoid habit: σ′ = σ(1 − σ), so return p ⊙ (1 − p). That is the diagonal of the
#   Jacobian, and it never looks at dp;
# * a sign slip while deriving: p ⊙ (Σ dp·p − dp).

# %%
slips = {
    "p ⊙ (1 − p)": ("p, axis = cache\nreturn p * (1 - p)", "it ignores dp"),
    "sign flipped": ("p, axis = cache\n"
                     "return p * ((dp * p).sum(axis=axis, keepdims=True) - dp)",
                     "the sign flipped"),
}
slip_results = {}
for label, (body, expected) in slips.items():
    report, status, slip_results[label] = check(body)
    hint = next(line.strip() for line in report.splitlines() if line.strip().startswith("hint:"))
    assert status == 1 and expected in hint, f"{label}: expected a hint saying {expected!r}"
print("✓ a body that ignores dp and a body with the wrong sign each get their own hint")

# %% [markdown]
# The missing term
# ----------------
#
# Lesson 05 built the Jacobian of softmax, ∂p_i/∂x_j = p_i (δ_ij − p_j), or diag(p) − p pᵀ: x_j
# moves p_j through the numerator, and every p_i of its row through the sum Σ_k exp(x_k) in the
# denominator. A backward pass multiplies dp by that Jacobian (it is symmetric, so no transpose
# is needed)::
#
#     dx_j = Σ_i dp_i p_i (δ_ij − p_j) = p_j dp_j − p_j Σ_i dp_i p_i = p_j (dp_j − s)
#
# The first term is attempt 1; the second is the p_j · s the report pointed at. As code: one
# sum along the softmax's axis, subtracted from dp.
#
# Attempt 2: the formula, typed in a hurry
# ----------------------------------------
#
# The sum along ``axis`` drops that axis: (2, 3, 5) becomes (2, 3), which cannot be subtracted
# from dp of shape (2, 3, 5). Because the check's axes all have different sizes, the slip cannot
# broadcast by accident into wrong numbers; it fails loudly, and the report shows the line of
# your file that raised, nothing from inside minitf.

# %%
attempt_2 = """
p, axis = cache
return p * (dp - (dp * p).sum(axis=axis))
"""
report, status, result_2 = check(attempt_2)
assert status == 1 and result_2.stopped and not result_2.rows, "a body that raises is stopped"
assert "ValueError" in report and "return p * (dp - (dp * p).sum(axis=axis))" in report, \
    "the report should quote the line of the learner's file that raised, and the error"
print("✓ attempt 2 raises, and the report points at the line in your file")

# %% [markdown]
# Attempt 3: keepdims
# -------------------
#
# The starter's hint said it: reduce along ``axis`` with ``keepdims=True``, so s keeps a size-1
# axis and broadcasts along the row. A fully masked row has p = 0 everywhere, so this formula
# gives it dx = 0 without any special case.

# %%
attempt_3 = """
p, axis = cache
s = (dp * p).sum(axis=axis, keepdims=True)      # one number per row
return p * (dp - s)
"""
report, status, result_3 = check(attempt_3)
errors = [r.error for r in result_3.rows]
assert status == 0 and result_3.passed, "the right formula passes"
assert len(errors) == 3 and max(errors) < 1e-8, f"far below the 1e-6 tolerance, got {errors}"
assert report.rstrip().endswith("softmax_backward: passes every check"), report
print(f"✓ attempt 3 passes all three checks, at {max(errors):.1e}: "
      f"{gradcheck.TOLERANCE / max(errors):,.0f} times below the tolerance")

# %% [markdown]
# The third check is there for a shortcut: softmax is nearly always taken along the last axis,
# so ``.sum(axis=-1, keepdims=True)`` looks as good as ``axis=axis``. It is, in the first two
# checks. The third takes softmax along axis 1 of a (2, 4, 3) input, where only ``axis`` is right.
# The hint can only guess the catalogue's slip here, but it adds that the other cases pass: look
# at what the failing one adds, its axis.

# %%
report, status, result_last = check(attempt_3.replace("axis=axis", "axis=-1"))
assert [r.passed for r in result_last.rows] == [True, True, False], "only the axis-1 check fails"
assert "pass: look first at what the failing cases add" in report, report
print(f"✓ axis=-1 hard-coded passes two checks, fails the third: {result_last.rows[2].error:.2f}")

# %% [markdown]
# One trap gets every number right and still fails: dx built in ``np.zeros(p.shape)`` is
# float64 whatever p is, which no float64 check can see and the float32 rerun does.

# %%
report, status, result_4 = check("""
import numpy as np
p, axis = cache
dx = np.zeros(p.shape)                          # float64, whatever p is
return dx + p * (dp - (dp * p).sum(axis=axis, keepdims=True))
""")
assert status == 1 and all(r.check.endswith("in float32") for r in result_4.rows) and \
    "your gradient is float64, wanted float32" in report, "right in float64, wrong dtype in float32"
print("✓ a gradient of a fixed dtype passes float64 and fails the float32 rerun")

# %% [markdown]
# There is no "nearly right" in between: the wrong bodies score about 1e-1 to 1, the right one
# about 1e-10, and the body that raised has no numbers at all.

# %%
attempts = [("attempt 1\np ⊙ dp", result_1), ("slip\np ⊙ (1 − p)", slip_results["p ⊙ (1 − p)"]),
            ("slip\nsign flipped", slip_results["sign flipped"]),
            ("attempt 2\nno keepdims", result_2), ("attempt 3\ncorrect", result_3)]
wrong = [r.error for _, result in attempts[:3] for r in result.rows]
print(f"wrong bodies: {min(wrong):.2f} to {max(wrong):.2f};  the right one: {max(errors):.1e}")
assert min(wrong) > 1e4 * gradcheck.TOLERANCE > 1e4 * max(errors), \
    "wrong bodies fail by orders of magnitude, the right one passes by orders of magnitude"

fig, ax = viz.figure(size=(8.2, 4.2))
where = [i for i, (_, r) in enumerate(attempts) if r.rows]       # attempt 2 raised: no rows
for k, (row, colour) in enumerate(zip(result_3.rows, ("tab:blue", "tab:orange", "tab:green"))):
    ax.bar(np.array(where) + (k - 1) * 0.27, [attempts[i][1].rows[k].error for i in where],
           width=0.27, color=colour, label=f"'{row.check}', x {row.shape}")
for i in sorted(set(range(len(attempts))) - set(where)):
    ax.text(i, 1e-9, "raised\nValueError:\nnothing to plot", ha="center", va="center", fontsize=8)
ax.axhline(gradcheck.TOLERANCE, color="gray", ls="--", lw=1, label="tolerance 1e-6")
ax.axhspan(gradcheck.TOLERANCE, 1e4, color="tab:red", alpha=0.06)
ax.text(4.55, 2e-6, "fails", ha="right", va="bottom", fontsize=8, color="tab:red")
ax.text(4.55, 5e-7, "passes", ha="right", va="top", fontsize=8, color="tab:green")
ax.set(yscale="log", ylim=(1e-12, 1e4), xlim=(-0.6, 4.6),        # room above the bars: legend
       ylabel="max relative error (log scale)",
       title="Checking softmax_backward: every wrong body fails by far, the right one passes")
ax.set_xticks(range(len(attempts)), labels=[name for name, _ in attempts])
ax.legend(loc="upper center", fontsize=8, ncol=2)
viz.save(fig, "19_attempts")
workdir.cleanup()

# %% [markdown]
# Now for real
# ------------
#
# At your own keyboard the loop is three commands, in a folder of your choice::
#
#     minitf exercise list                      # the catalogue, easiest first
#     minitf exercise start softmax_backward    # writes softmax_backward.py here (or --dir DIR)
#     minitf exercise check softmax_backward.py # grades it; exit status 0 only when all pass
#
# Edit the file between its fence lines, check, read the report, edit again. ``start`` never
# overwrites a file you have already edited. A good path through the catalogue: ``relu_backward``
# and ``linear_backward`` to warm up, then ``softmax_backward`` (without looking above),
# ``layer_norm_backward`` (three paths into dx) and ``attention_backward``. That last one calls
# softmax's backward, but it is graded with minitf's own there, so an earlier exercise can never
# cost you a later one.
#
# A homework directory from your instructor instead holds its own copy of minitf, the chosen
# bodies blank between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` lines, and a README listing
# them. Write each body in place, change nothing outside those lines, and grade the whole
# directory from inside it with ``python -m minitf homework grade .``: one row per exercise,
# with the tensors that pass, its verdict (passed; failed; error, for code that raised or did
# not load; not written, or helper not written for a blank helper of the exercise; blocked by
# another blank body it calls) and its score; ``--json results.json`` adds each full report,
# the one read above. Your instructor runs the same grader against minitf's reference.
#
# What to remember
# ----------------
#
# * An exercise is one of minitf's backward passes with its body cut out; ``start`` writes it,
#   ``check`` grades it with your function standing in for minitf's, everything else unchanged.
# * Grading is lesson 05's check: float64, central differences, a random upstream gradient,
#   different sizes on every axis, one relative error per tensor, passing at 1e-6; then each
#   passing case once more in float32, where every gradient must keep its input's dtype.
# * Read the report from the worst entry: yours vs numeric, how many entries are off, and the
#   hint, which names a signature (ignores dp, a constant factor, a transpose) or the classic slip.
# * Softmax's backward is p ⊙ (dp − Σ dp·p), the sum taken with keepdims: p ⊙ dp alone misses
#   the path through the normalising sum.
#
# That is the loop. Pick the next exercise with ``minitf exercise list``.
#
# Next, lesson 20: a real pretrained Transformer, run and fine-tuned through these same layers.
