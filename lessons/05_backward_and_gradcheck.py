"""
A backward pass by hand, checked by finite differences
======================================================

Training is "backprop, then update the parameters". minitf has no autograd: every backward
pass is written by hand, so every one of them can be wrong. This lesson derives one (the
softmax's), shows how ``minitf.gradcheck`` compares a backward pass against finite differences,
breaks two backward passes on purpose to watch the check catch them, and looks at the choices
inside the check: a random upstream gradient, an error taken over the whole tensor, a step of
1e-6 in float64.

Run it: ``minitf lesson 5`` (a few seconds), or as a plain script,
``python lessons/05_backward_and_gradcheck.py``.
"""

# %%
import numpy as np

import minitf.functional as F
import minitf.nn as nn
from minitf import backend, gradcheck, optim, viz
from minitf.gradcheck import FunctionCase, ModuleCase, numerical_gradient, relative_error

backend.precision("float64")      # central differences need float64's 16 digits
backend.seed(0)
TOL = gradcheck.TOLERANCE          # 1e-6: every check in minitf must get under it

# %% [markdown]
# What a backward pass computes
# -----------------------------
#
# A layer maps x to y; somewhere downstream a scalar loss L depends on y. The backward pass
# receives the upstream gradient dy = ∂L/∂y and must return dx = ∂L/∂x. By the chain rule
# that is dx = Jᵀ dy, with J = ∂y/∂x the Jacobian: a *vector–Jacobian product*. The art is to
# compute it without ever building J, which for a (b, h, n, n) attention tensor would be
# enormous.
#
# Softmax, row by row: p_i = e^{x_i} / Σ_j e^{x_j}. Differentiating gives::
#
#     ∂p_i/∂x_j = p_i (δ_ij − p_j)          so  J = diag(p) − p pᵀ   (symmetric)
#     dx = J dp = p ⊙ dp − p (pᵀ dp) = p ⊙ (dp − Σ_j dp_j p_j)
#
# The last line costs O(n) per row instead of the O(n²) of the matrix. ``F.softmax_backward``
# is exactly that line. We compare it with the explicit Jacobian, row by row. Two properties of
# diag(p) − p pᵀ hold by construction, for any p that sums to 1: the matrix is symmetric, and
# each of its rows sums to p_i − p_i · Σ_j p_j = 0. We print them as identities; the second one
# comes back in a moment.

# %%
x = backend.randn(3, 5)                                  # 3 rows of 5 scores
p, cache = F.softmax(x)                                  # (3, 5)
dp = backend.randn(3, 5)                                 # an upstream gradient
dx = F.softmax_backward(dp, cache)                       # p ⊙ (dp − Σ dp·p)

jacobians = [np.diag(row) - np.outer(row, row) for row in p]       # 3 × (5, 5)
dx_explicit = np.stack([J.T @ g for J, g in zip(jacobians, dp)])
print("J for row 0 =\n", np.round(jacobians[0], 4))
print(f"max |JVP − J dp| = {np.abs(dx - dx_explicit).max():.1e}")
assert np.abs(dx - dx_explicit).max() < 1e-12, "p ⊙ (dp − Σ dp·p) should equal (diag p − p pᵀ) dp"
print("identities of diag(p) − p pᵀ: symmetric", all(np.allclose(J, J.T) for J in jacobians),
      f"| largest row sum {max(np.abs(J.sum(axis=1)).max() for J in jacobians):.1e}")
print("✓ the vector–Jacobian product equals the explicit Jacobian, without building it")

# %% [markdown]
# Checking it by finite differences
# ---------------------------------
#
# Calculus can be checked by arithmetic. To test a backward pass for y = f(x), draw a random g
# of y's shape and look at the scalar L = Σ g ⊙ f(x). Its exact gradient is backward(g); its
# numerical gradient comes from nudging one entry of x at a time::
#
#     ∂L/∂x_i ≈ (L(x + h e_i) − L(x − h e_i)) / 2h          (central differences, error O(h²))
#
# ``gradcheck.check`` does this for every input, and reports for each tensor the relative error::
#
#     max_i |a_i − b_i| / (max_i |a_i| + max_i |b_i|)
#
# which passes at ≤ 1e-6. A correct backward typically lands near 1e-10; a wrong one somewhere
# between 1e-1 and 1 (the broken ones in this lesson all score in that range: the check below
# prints how far apart).

# %%
case = FunctionCase(F.softmax, F.softmax_backward, {"x": x}, ("x",))
rows = gradcheck.check("softmax", case)
print(gradcheck.format_table(rows))
assert all(r.passed for r in rows), "F.softmax_backward should pass its gradient check"
assert rows[0].error < 1e-9, f"a correct backward lands far below 1e-6, got {rows[0].error:.1e}"
print("✓ F.softmax_backward agrees with finite differences")

# %% [markdown]
# Why the upstream gradient must be random
# ----------------------------------------
#
# The easy choice would be g = 1 everywhere, i.e. L = Σ softmax(x). But every row of a softmax
# sums to 1, so that L is a constant and its true gradient is 0: the rows of J sum to zero,
# as we just saw. Any backward pass that also returns 0 for a constant dp then "agrees" with
# the truth. Here is a classic slip, forgetting the outer p ⊙: with g = 1 it returns exactly
# what the correct one returns; with a random g it is visibly wrong.
#
# A second trap: g must not be the input itself. With g set equal to x (a fixed copy of its
# values) and γ = 1, layer norm's backward returns (almost) 0, because layer norm ignores
# shifts and rescalings of x: J x ≈ 0, and with γ = 1 its Jacobian is symmetric, so Jᵀ x ≈ 0
# too. What is left, x̂ · ε / (σ² + ε), comes only from the ε = 1e-5 inside the square root.
# A check that draws g = x would only confirm that the backward returns about 0, which proves
# next to nothing.

# %%
def softmax_backward_without_p(dp, cache):
    """BROKEN on purpose: dx = dp − Σ dp·p, the outer p ⊙ forgotten."""
    p, axis = cache
    return dp - (dp * p).sum(axis=axis, keepdims=True)


ones = np.ones_like(p)
hidden = np.abs(softmax_backward_without_p(ones, cache) - F.softmax_backward(ones, cache)).max()
seen = np.abs(softmax_backward_without_p(dp, cache) - F.softmax_backward(dp, cache)).max()
broken = gradcheck.check("softmax, p ⊙ forgotten",
                         FunctionCase(F.softmax, softmax_backward_without_p, {"x": x}, ("x",)))
print(f"broken − correct: with g = 1 {hidden:.1e}; with a random g {seen:.2f}; "
      f"gradcheck error {broken[0].error:.2f}")
assert hidden < 1e-15, "with g = 1 the broken and the correct backward give the same numbers"
assert seen > 0.1 and not broken[0].passed, "a random g exposes the missing p ⊙"

_, ln_cache = F.layer_norm(x, np.ones(5), np.zeros(5))   # the same 3 rows of x; γ = 1, β = 0
dz_self = F.layer_norm_backward(x.copy(), ln_cache)[0]   # g = a copy of x
dz_rand = F.layer_norm_backward(dp, ln_cache)[0]         # g = the random dp from above
print(f"layer norm, max |dx|: with g = x {np.abs(dz_self).max():.1e}; "
      f"with a random g {np.abs(dz_rand).max():.2f}")
x_hat, rstd, _ = ln_cache
assert np.allclose(dz_self, x_hat * 1e-5 * rstd ** 2, rtol=1e-6, atol=0), \
    "with g = x (and γ = 1) layer norm's backward should be only the ε-term x̂ ε / (σ² + ε)"
assert np.abs(dz_self).max() < 1e-3 * np.abs(dz_rand).max(), "… which is ~0 next to a random g's"
assert np.abs(dz_rand).max() > 0.1, "a random g gives a gradient of ordinary size"
print("✓ g = 1 hides the softmax bug, g = x zeroes layer norm's gradient; a random g does neither")

# %% [markdown]
# Two broken backward passes
# --------------------------
#
# Gradient checks earn their keep on bugs that look plausible. Two favourites:
#
# * **attention without the scale.** scores = q kᵀ · s with s = 1/√d_k, so dq and dk each carry
#   a factor s. Forget it and dq, dk come out √d_k times too large, while dv (which never
#   passes through the scores) is still right.
# * **layer norm without the variance path.** x̂ = (x − μ)/σ, and σ depends on every x_i of the
#   row. Treat σ as a constant and dx misses the term −x̂ ⊙ mean(dx̂ ⊙ x̂)/σ; dγ and dβ, which
#   only need x̂, are still right.
#
# The check is per tensor, so it points at the gradient that is wrong, not only at the layer.

# %%
def attention_backward_without_scale(dout, cache):
    """BROKEN on purpose: the correct gradients with the factor 1/√d_k taken out of dq and dk."""
    dq, dk, dv, dbias = F.attention_backward(dout, cache)
    return dq / cache.scale, dk / cache.scale, dv, dbias


def layer_norm_backward_without_variance(dy, cache):
    """BROKEN on purpose: σ treated as a constant, so only the path through μ is kept."""
    x_hat, rstd, gamma = cache
    dx_hat = dy * gamma
    dx = (dx_hat - dx_hat.mean(axis=-1, keepdims=True)) * rstd
    positions = tuple(range(dy.ndim - 1))
    return dx, (dy * x_hat).sum(axis=positions), dy.sum(axis=positions)


qkv = {"q": backend.randn(2, 3, 4), "k": backend.randn(2, 5, 4), "v": backend.randn(2, 5, 6)}
ln = {"x": backend.randn(2, 3, 6), "gamma": backend.randn(6), "beta": backend.randn(6)}
reports = {}
for label, forward, backward, inputs in (
        ("attention", F.attention, F.attention_backward, qkv),
        ("attention, no scale", F.attention, attention_backward_without_scale, qkv),
        ("layer_norm", F.layer_norm, F.layer_norm_backward, ln),
        ("layer_norm, no variance path", F.layer_norm, layer_norm_backward_without_variance, ln)):
    rows = gradcheck.check(label, FunctionCase(forward, backward, inputs, tuple(inputs)))
    reports[label] = {r.tensor: r for r in rows}
    print(gradcheck.format_table(rows), "\n")

ok = {label: {t: r.passed for t, r in report.items()} for label, report in reports.items()}
assert all(ok["attention"].values()) and all(ok["layer_norm"].values()), "correct ones pass"
assert ok["attention, no scale"] == {"q": False, "k": False, "v": True}, \
    f"without the scale q and k should fail and v pass, got {ok['attention, no scale']}"
assert ok["layer_norm, no variance path"] == {"x": False, "gamma": True, "beta": True}, \
    f"without the variance path only x should fail, got {ok['layer_norm, no variance path']}"
wrong = [broken[0].error] + [r.error for report in reports.values() for r in report.values()
                             if not r.passed]
print(f"the wrong gradients score {min(wrong):.2f} to {max(wrong):.2f}")
assert all(0.1 <= e <= 1 for e in wrong), f"wrong gradients should score 1e-1 to 1, got {wrong}"
print("✓ each broken backward fails exactly on the tensors it gets wrong")

fig, ax = viz.figure(size=(9.6, 4.2))
groups = {"softmax, p ⊙ forgotten": {r.tensor: r for r in broken}, **reports}
bars = [(f"{label}\n{tensor}", r.error) for label, report in groups.items()
        for tensor, r in report.items()]
colors = ["tab:green" if e <= TOL else "tab:red" for _, e in bars]
ax.bar(range(len(bars)), [e for _, e in bars], color=colors)
ax.set_xticks(range(len(bars)), labels=[name.split("\n")[1] for name, _ in bars])
# one group label per check, at y = 2: above the tallest bar (at most 1, asserted), below 1e2
for i, label in enumerate(groups):
    first = sum(len(r) for r in list(groups.values())[:i])
    ax.text(first + (len(groups[label]) - 1) / 2, 2, label.replace(", ", ",\n"),
            ha="center", va="bottom", fontsize=8)
    if i:
        ax.axvline(first - 0.5, color="lightgray", lw=1)
ax.axhline(TOL, color="gray", ls="--", lw=1)
ax.text(len(bars) - 0.6, 2 * TOL, "tolerance 1e-6", ha="right", fontsize=8, color="gray")
ax.set_yscale("log")
ax.set_ylim(1e-13, 1e2)
ax.set_ylabel("max relative error")
ax.set_xlabel("tensor whose gradient is checked")
ax.set_title("Gradient checks of correct (green) and broken (red) backward passes")
viz.save(fig, "05_broken_backwards")

# %% [markdown]
# A gradient that is truly zero: the key bias
# -------------------------------------------
#
# Why measure the error against the whole tensor's scale, and not entry by entry? Because some
# exact gradients are 0. In ``nn.MultiHeadAttention`` the key projection has a bias b_k, and it
# adds q_i · b_k to *every* score of query i: the same constant along the whole row of scores.
# Softmax ignores such a constant (it cancels between numerator and denominator), so the loss
# does not depend on b_k at all. Finite differences still see rounding noise of about 1e-10
# there; divided entry by entry by a true 0, that noise reads as a 100% error.

# %%
d_model, n_heads = 8, 2
mha = nn.MultiHeadAttention(d_model, n_heads)
xs = backend.randn(2, 4, d_model)
g = backend.randn(2, 4, d_model)
mha.zero_grad()
mha(xs)
mha.backward(g)
bias_grad = mha.W_qkv.b.grad                             # (24,) = query | key | value biases
query_b, key_b = bias_grad[:d_model], bias_grad[d_model:2 * d_model]
print(f"max |dL/db_q| = {np.abs(query_b).max():.2f}   max |dL/db_k| = {np.abs(key_b).max():.1e}")

bias = mha.W_qkv.b.data
numeric = numerical_gradient(lambda: float((mha(xs) * g).sum()), bias)
a, b = bias_grad[d_model:2 * d_model], numeric[d_model:2 * d_model]
per_entry = np.abs(a - b) / np.maximum(np.abs(a) + np.abs(b), 1e-300)
whole = relative_error(bias_grad, numeric)
print(f"key bias entry by entry: worst {per_entry.max():.2f};  whole tensor: {whole:.1e}")
assert np.abs(key_b).max() < 1e-10, "the key bias gets no gradient: softmax ignores row constants"
assert np.abs(query_b).max() > 0.1, "the query bias does get a gradient"
assert per_entry.max() > 0.1, "entry by entry, rounding noise against a true 0 looks like a bug"
assert whole < TOL, "over the whole tensor the same numbers pass"
rows = gradcheck.check("MultiHeadAttention", ModuleCase(mha, {"x": xs}))
assert all(r.passed for r in rows), "\n" + gradcheck.format_table(rows)
print("✓ the key-bias gradient is 0 up to rounding; minitf's whole-tensor error is not fooled")

# %% [markdown]
# Choosing the step h
# -------------------
#
# The finite difference has two errors pulling in opposite directions. *Truncation*: the
# central difference is exact only for quadratics, and its error shrinks like h². *Rounding*:
# L(x ± h e_i) are each computed with a relative error of about ε (2.2e-16 in float64), and
# dividing their difference by 2h magnifies that to about ε/h. The sum is a V on log–log axes,
# with its bottom near h ≈ ε^{1/3}. In float32 (ε ≈ 1.2e-7) even the bottom of the V stays above
# 1e-6, a few times the tolerance at best: a correct backward would fail, and a wrong one would
# hide in the noise. That is why every gradient check in minitf runs in float64, with h = 1e-6.

# %%
def step_curve(dtype):
    """Relative error of numerical_gradient(step=h) against softmax_backward, for each h."""
    z = x.astype(dtype)
    exact = F.softmax_backward(dp, F.softmax(x)[1])      # the float64 gradient of Σ dp ⊙ p
    loss = lambda: float((F.softmax(z)[0] * dp.astype(dtype)).sum())  # noqa: E731
    return np.array([relative_error(exact, numerical_gradient(loss, z, step=h)) for h in steps])


steps = np.logspace(-12, -1, 34)
curve64, curve32 = step_curve(np.float64), step_curve(np.float32)
best = steps[curve64.argmin()]
for h in (1e-12, 1e-9, 1e-6, 1e-3, 1e-1):
    i = np.abs(np.log(steps / h)).argmin()
    print(f"h = {steps[i]:.0e}: float64 error {curve64[i]:.1e}   float32 error {curve32[i]:.1e}")
print(f"best h in float64: {best:.1e} (ε^(1/3) = {np.finfo(float).eps ** (1 / 3):.1e})")
print(f"best in float32: error {curve32.min():.1e} at h = {steps[curve32.argmin()]:.0e}")
assert 1e-7 < best < 1e-3, f"the bottom of the V should lie near ε^(1/3), got {best:.1e}"
assert curve64[0] > 1e-6 and curve64[-1] > 1e-6, "both ends of the V fail the tolerance"
assert curve64[np.abs(np.log(steps / gradcheck.STEP)).argmin()] < 1e-8, "h = 1e-6 is safe"
assert curve32.min() > TOL, "in float32 no step gets under the 1e-6 tolerance"
print("✓ the V: truncation error on the right, rounding error on the left; float64 needed")

fig, ax = viz.figure(size=(6.4, 4.4))
viz.curves(ax, steps, {"float64": curve64, "float32": curve32}, logx=True, logy=True,
           hline=(TOL, "tolerance 1e-6"), xlabel="finite-difference step h",
           ylabel="relative error of the numerical gradient",
           title="Gradient check of softmax: error vs step size")
ax.axvline(gradcheck.STEP, color="tab:gray", ls=":", lw=1)
ax.text(gradcheck.STEP * 1.3, 1e-7, "minitf's h = 1e-6", fontsize=8, color="tab:gray")
ax.text(1e-11, 3e-5, "rounding ≈ ε/h", fontsize=8)
ax.text(1e-3, 3e-9, "truncation ∝ h²", fontsize=8)
viz.save(fig, "05_gradcheck_step")

# %% [markdown]
# Backprop, then update
# ---------------------
#
# The lectures' recipe for training is: compute the loss, backpropagate, update the
# parameters. A checked gradient is what makes the update trustworthy. One plain SGD step on
# the attention layer above, with L = ½ ‖MHA(x) − target‖², should lower the loss by about
# lr · ‖∇L‖² (the first-order prediction), and it does.

# %%
target = backend.randn(2, 4, d_model)
out = mha(xs)
loss_before = 0.5 * float(((out - target) ** 2).sum())
mha.zero_grad()
mha.backward(out - target)                               # dL/dy for the squared error
grad_sq = sum(float((prm.grad ** 2).sum()) for prm in mha.parameters())
lr = 1e-4
optim.SGD(mha, lr=lr).step()                             # θ ← θ − lr · ∇L
loss_after = 0.5 * float(((mha(xs) - target) ** 2).sum())
print(f"loss {loss_before:.4f} → {loss_after:.4f}: decrease {loss_before - loss_after:.5f}, "
      f"predicted lr·‖∇L‖² = {lr * grad_sq:.5f}")
assert loss_after < loss_before, "a step against the gradient lowers the loss"
assert abs((loss_before - loss_after) / (lr * grad_sq) - 1) < 0.05, \
    "for a small step the decrease should match lr·‖∇L‖² to within 5%"
print("✓ backprop, then update: the loss falls by what the gradient predicts")

# %% [markdown]
# What to remember
# ----------------
#
# * A backward pass is a vector–Jacobian product; softmax's is p ⊙ (dp − Σ dp·p), O(n) a row.
# * ``gradcheck.check`` compares it with central differences of Σ g ⊙ f(x), per tensor, and
#   passes at a relative error ≤ 1e-6. Use a random g: g = 1 (softmax) or g = x (layer norm)
#   can make the true gradient (almost) 0.
# * A broken backward fails on exactly the tensors it gets wrong: no scale → dq and dk;
#   no variance path → dx of layer norm.
# * Some true gradients are 0 (the key bias), so the error is measured over the whole tensor.
# * h = 1e-6 in float64 sits in the bottom of the V between rounding and truncation.
# * A backward reads what its forward kept (softmax's p); lesson 07 measures that memory for a
#   stack of blocks, and what ``nn.no_grad()`` frees.
#
# Your turn: ``minitf exercise list`` shows 21 backward passes to write yourself, graded by these
# same checks; lesson 19 walks one of them from a blank body to a pass.
#
# Next, lesson 06: several attention heads side by side.
