"""The course: the lesson scripts in ``lessons/``, what each teaches and draws, and how long it runs.

A lesson is a plain Python file in the jupytext "percent" format (``# %%`` cells), so it runs as a
script, opens as cells in VS Code and as a notebook in Jupyter. Its docstring's first line is its
title everywhere: in ``minitf lesson``, in ``lessons/README.md`` and on a web page.

This module is the one list of lessons: the figures each one must save (the lesson test checks
that it saves exactly these) and its measured runtime. ``lessons/README.md`` holds the same table,
printed by ``minitf lesson --table``; a test keeps the two equal.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from minitf.viz import FIGURES_ENV


@dataclass(frozen=True)
class Lesson:
    stem: str                    # file name without .py, e.g. "01_attention_by_hand"
    teaches: str                 # one line: what a student takes away
    concepts: str                # what of the lectures it covers, in words
    figures: tuple               # names passed to viz.save, without ".png"
    seconds: float               # measured: python lessons/<stem>.py on a 2-core CPU

    @property
    def number(self) -> int:
        return int(self.stem.split("_", 1)[0])


LESSONS = (
    Lesson("01_attention_by_hand",
           "attention as a soft lookup: scores, softmax, a weighted sum of values",
           "queries, keys and values; \"The cat sat on\"; the scaled dot product; row-wise "
           "softmax; the Thinking Machines quiz; the Hello/I/love/you matrix; M queries × N "
           "keys; all rows at once, and what recurrent networks lack",
           ("01_the_cat_sat_on", "01_thinking_machines", "01_soft_lookup", "01_hello_i_love_you"),
           0.8),
    Lesson("02_why_sqrt_dk",
           "var(q·k) = d_k; raw scores make the softmax one-hot and kill its gradient",
           "why divide by √d_k; var(q·k) = d_k for unit-variance entries; vanishing softmax "
           "gradients; the \"q and v\" slip (it is q and k)",
           ("02_sqrt_dk", "02_saturation"), 1.5),
    Lesson("03_self_attention_needs_weights",
           "softmax(XXᵀ)X learns nothing and favours itself; W_Q ≠ W_K fix it; outputs stay "
           "in the values' hull",
           "the simplest self-attention softmax(XXᵀ); the diagonal bound; learned W_Q, W_K, W_V; "
           "outputs in the span of the values, hence the MLP",
           ("03_unequal_norms", "03_diagonal", "03_convex_hull"), 1.0),
    Lesson("04_masks",
           "an added mask gives forbidden keys weight 0 and renormalizes over the rest",
           "the 12 × 12 scores masked; renormalizing vs zeroing; added, not multiplied; −1e9 vs "
           "−∞; padding for variable lengths; the masking quiz (B)",
           ("04_masking", "04_padding", "04_no_future"), 1.7),
    Lesson("05_backward_and_gradcheck",
           "a backward pass as a vector–Jacobian product, checked by finite differences",
           "backprop, then update the parameters; the softmax Jacobian; why checks use float64, "
           "a random upstream gradient and the error over the whole tensor",
           ("05_broken_backwards", "05_gradcheck_step"), 0.8),
    Lesson("06_multi_head_attention",
           "several heads side by side: split, attend, concatenate, mix with W_o; why one head "
           "is not enough",
           "parallel heads, concatenation and W_o; d/h-wide vs full-width heads; d_v ≠ d_k; the "
           "PyTorch demo's shapes; 4d² + 4d parameters; one softmax only averages; the original "
           "sizes (h = 8, d = 512)",
           ("06_heads", "06_copy_heads"), 1.0),
    Lesson("07_transformer_block",
           "the block: feed-forward per position, residuals and LayerNorm; depth; pre-LN vs "
           "post-LN; the memory a forward keeps for its backward",
           "FFN with d_ff 2–8× d; residuals; LayerNorm; the post-LN equations; each token on its "
           "own path; what a stack of blocks keeps for its backward, and what nn.no_grad() frees; "
           "deep plain stacks vanish; pre-LN trains where post-LN stalls; the annotated residual "
           "is pre-LN",
           ("07_token_paths", "07_depth_gradients", "07_pre_vs_post_ln"), 4.1),
    Lesson("08_order_and_sinusoids",
           "order is invisible to attention; raw index, binary code and sinusoids; offsets as "
           "rotations",
           "permutation equivariance; sets vs sequences; the 4-bit code; sinusoids and the "
           "frequency quiz; rotation; a fixed table with dropout after it; add vs concatenate; ×√d; "
           "three slide slips",
           ("08_sinusoidal_pe", "08_binary_vs_sinusoid"), 0.9),
    Lesson("09_relative_positions",
           "relative schemes put the offset j − i into the score: T5, ALiBi, RoPE, Shaw",
           "T5 buckets and the Toeplitz bias; where the bias goes (a slide slip); ALiBi slopes; "
           "RoPE as a rotation, R_mᵀR_n = R_{n−m}, in LLaMA; Shaw's clipped key and value vectors",
           ("09_relative_biases",), 2.0),
    Lesson("10_length_generalization",
           "any length runs, not every length works: ALiBi stays flat past training, sinusoids "
           "and RoPE degrade",
           "parameters don't depend on n; the learned table stops at max_len; train short, test "
           "long for five schemes; why each one breaks or holds; positions in every LLM",
           ("10_length_generalization",), 11.5),
    Lesson("11_training_a_language_model",
           "training a next-token LM: shift by one, a loss per position, sum vs mean, leakage; "
           "a recurrent LM beside a Transformer",
           "shift by one; a distribution and a loss per position; sum vs mean (a slide slip); "
           "the \"what do we optimize?\" quiz; backprop, then update; leakage without the mask; "
           "a character LM vs a bigram; an RNN LM trained beside a Transformer; the vanishing "
           "gradient over distance",
           ("11_leakage", "11_per_position_loss", "11_rnn_vs_transformer"), 5.3),
    Lesson("12_generation_and_kv_cache",
           "generate token by token; greedy, temperature, top-k, top-p; a KV cache: the same "
           "logits at O(n) per step",
           "the autoregressive loop; argmax → index → \"am\"; four decoding rules; cached ≡ "
           "uncached at every step; 2·L·b·n·d numbers; O(n) per token vs O(n²); the x[:, -1] "
           "slip, silent when n = d",
           ("12_sampling", "12_kv_cache"), 4.1),
    Lesson("13_cost_model",
           "counting parameters, FLOPs, IO and memory; arithmetic intensity; where the n² terms "
           "take over; the scores a causal mask wastes, skipped; n² attention vs a sequential "
           "recurrence",
           "4d² + 2d·d_ff and the 2d/d_ff ratio; 2nmk FLOPs and nm + mk + nk IO (a slide slip); "
           "the per-operation cost tables; memory-bound below ~300 FLOPs per number; bottleneck "
           "#1, the n² terms past n = 6d; a decoded token's IO; n² time and memory; "
           "self-attention vs RNN steps",
           ("13_cost_table", "13_attention_scaling"), 1.6),
    Lesson("14_encoder_decoder",
           "encoder–decoder: three attentions, teacher forcing in one pass, the top-encoder "
           "wiring",
           "the three kinds of Transformer by their masks, and kinds of tokens; encoder self, "
           "masked self and cross-attention; teacher forcing (BOS, not <EOS>); greedy and beam "
           "search; an unseen length fails; the O(N²) + O(M²) + O(NM) quiz; which encoder output "
           "each layer reads",
           ("14_enc_dec_cost", "14_cross_attention"), 3.8),
    Lesson("15_encoder_only_bert_and_vit",
           "encoder-only models: [CLS] classification, masked-LM pretraining, a ViT patch is a "
           "convolution",
           "CLS reads negation a bag of words cannot; the three movie sentences; [MASK] 80/10/10 "
           "filled from both sides, 15 % chosen per word (a sentence may get none); [SEP] and "
           "segments; ViT patches as words; sets, no positions",
           ("15_masked_lm", "15_cls_attention"), 4.5),
    Lesson("16_attention_and_convolution",
           "heads with one-offset masks form a convolution; splitting wide saves weights but "
           "isolates the parts",
           "one softmax picks or averages; a K = 3 convolution as 3 heads; a 3 × 3 one as 9 "
           "heads; zero padding from masked rows; k parts: k² fewer weights, k× fewer FLOPs, no "
           "talk; why wide",
           ("16_conv_heads",), 1.1),
    Lesson("17_positions_beyond_text",
           "an implicit image f(x, y) → rgb: raw coordinates blur, Fourier-feature octaves fit "
           "the edges",
           "implicit functions ℝ² → ℝ³ (pixel → colour); the MSE loss and PSNR; Fourier features "
           "as the sinusoidal encoding for real coordinates; spectral bias; octaves past the grid "
           "are constant on its pixels (aliasing)",
           ("17_implicit_function",), 2.3),
    Lesson("18_annotated_transformer_in_minitf",
           "the annotated Transformer's classes one by one against minitf's, with exact counts",
           "clones vs shared weights; embeddings × √d, a PE slice slip; −1e9 vs −inf; 4 linears "
           "= W_qkv + W_o; norm first; 3,152,384 / 4,204,032; attention dropout; Xavier (there on "
           "the embedding tables too); the PE a fixed buffer",
           ("18_parameter_breakdown",), 1.1),
    Lesson("19_your_first_exercise",
           "the exercise loop: start softmax_backward, check it, read a failing report, fix it, "
           "see it pass",
           "backprop by hand (softmax's backward, as lesson 05 derives it); how minitf "
           "grades a student's backward (float64, then float32 for the gradients' dtypes) and "
           "what its hints mean",
           ("19_attempts",), 1.2),
    Lesson("20_inside_a_pretrained_transformer",
           "a real pretrained encoder in minitf's layers: how its heads read \"it\"; fine-tune it",
           "all-MiniLM-L6-v2 loaded into minitf.nn; \"it was too tired / wide\": which heads send "
           "\"it\" to animal or street; attention sinks on [CLS]; sentence similarity; BERT-style "
           "classification from the pooled vector, fine-tuned by hand-written backprop",
           ("20_it_animal_or_street", "20_attention_grid", "20_similarity", "20_fine_tuning"),
           14.9),
)


# The lessons multiply small matrices, where BLAS threads mostly wait on each other: lesson 10 took
# 25 s alone with two threads and over 3 minutes beside one other busy process, but 21 s with one
# thread, steadily. So a lesson runs with one BLAS thread, unless the user chose a number.
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def lesson_environment(**extra) -> dict:
    """The environment a lesson runs in: this one, one BLAS thread by default, plus ``extra``."""
    return {**{name: "1" for name in BLAS_THREADS}, **os.environ, **extra}


class LessonError(ValueError):
    """A lesson that cannot be found: the message is one line for the command line."""


def lessons_dir(start: Path | None = None) -> Path:
    """The ``lessons/`` folder: in ``start`` (default: the working directory) or a parent of it."""
    start = (start or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / "lessons").is_dir() and (folder / "lessons" / f"{LESSONS[0].stem}.py").is_file():
            return folder / "lessons"
    raise LessonError(f"no lessons/ folder in {start} or above it; run 'minitf lesson' from the "
                      f"root of the minitf repository, where the lessons are")


def title(path: Path) -> str:
    """A lesson's title: the first line of its module docstring; its file's name where there is
    none to read (a student's edit that does not parse, a file that is not UTF-8 or is gone):
    one broken lesson must not take the listing of the others with it, and running it shows
    Python's own error, with its line."""
    try:
        docstring = ast.get_docstring(ast.parse(Path(path).read_text(encoding="utf-8"))) or ""
    except (SyntaxError, ValueError, OSError):      # a UnicodeDecodeError is a ValueError
        return Path(path).stem
    return docstring.strip().splitlines()[0] if docstring.strip() else Path(path).stem


def find(query: str) -> Lesson:
    """The lesson named by ``query``: its number ("4", "04") or part of its file name ("masks")."""
    query = str(query).strip().lower().removesuffix(".py")
    if query.isdecimal():                # '²' is a digit, which int() refuses
        matches = [lesson for lesson in LESSONS if lesson.number == int(query)]
    else:
        matches = [lesson for lesson in LESSONS if query and query in lesson.stem]
    if len(matches) == 1:
        return matches[0]
    numbers = f"{LESSONS[0].number:02d}–{LESSONS[-1].number:02d}"
    if not matches:
        raise LessonError(f"no lesson {query!r}; the lessons are {numbers}, by number or by "
                          f"name (see 'minitf lesson')")
    raise LessonError(f"{query!r} names {len(matches)} lessons ("
                      + ", ".join(m.stem for m in matches) + "); give its number")


def listing(folder: Path) -> str:
    """One line per lesson: number, runtime, file and title, the title last, where its length
    pushes no column out of line."""
    width = max(len(lesson.stem) for lesson in LESSONS) + len("lessons/.py")
    return "\n".join(f"{lesson.number:02d}  {_runtime(lesson.seconds):>5}  "
                     f"{'lessons/' + lesson.stem + '.py':<{width}}  "
                     f"{title(folder / f'{lesson.stem}.py')}" for lesson in LESSONS)


def table(folder: Path) -> str:
    """The Markdown table of lessons/README.md: title, what it teaches, concepts, figures, runtime."""
    rows = ["| # | lesson | what it teaches | from the lectures | figures | runtime |",
            "|---|---|---|---|---|---|"]
    for lesson in LESSONS:
        figures = "<br>".join(f"[{name}](../figures/{name}.png)" for name in lesson.figures)
        rows.append(f"| {lesson.number:02d} | [{title(folder / f'{lesson.stem}.py')}]"
                    f"({lesson.stem}.py) | {lesson.teaches} | {lesson.concepts} | {figures} | "
                    f"{_runtime(lesson.seconds)} |")
    return "\n".join(rows)


def _runtime(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds >= 1.5 else "1 s"


def _stamp(file: Path):
    """When and how large ``file`` was last written (None if it is not there): a figure the
    lesson drew has a new stamp."""
    try:
        stat = file.stat()
    except FileNotFoundError:
        return None
    return stat.st_mtime_ns, stat.st_size


def run(lesson: Lesson, folder: Path) -> int:
    """Run a lesson as a script (its own process, as a student would) and return its exit status.

    Its figures go where ``viz.figures_dir`` puts them: $MINITF_FIGURES, else figures/ beside
    lessons/.
    """
    path = folder / f"{lesson.stem}.py"
    figures = Path(os.environ.get(FIGURES_ENV) or folder.parent / "figures")
    files = [figures / f"{name}.png" for name in lesson.figures]
    before = [_stamp(file) for file in files]
    print(f"running lessons/{path.name}: {title(path)}\n", flush=True)
    status = subprocess.run([sys.executable, str(path)], cwd=folder.parent,
                            env=lesson_environment()).returncode
    drawn = [file.name for file, stamp in zip(files, before) if _stamp(file) != stamp]
    if status == 0 and files and not drawn:
        # a lesson that cannot run here (lesson 20 without the model's files) says why and exits 0
        print(f"\nlesson {lesson.number:02d} was skipped: it drew none of its figures (the "
              f"reason is above)")
    elif status == 0:
        print(f"\nlesson {lesson.number:02d} passed its checks; figures in {figures}: "
              + ", ".join(drawn))
    else:
        print(f"\nlesson {lesson.number:02d} stopped with exit status {status}: a check above "
              f"failed", file=sys.stderr)
    return status


def train_char_lm(train_ids, vocab_size: int, steps: int = 300, seed: int = 2):
    """The small character model that lessons 11 and 12 train, so that both have the same one:
    a causal ``DecoderLM`` (two blocks, d = 48, four heads, RoPE), ``steps`` AdamW steps on
    batches of 16 random 32-character windows of ``train_ids``, in float32; returned in float64.

    Each step is "backprop, then update the parameters": clear the gradients, run the forward
    and the backward, cap the gradients' global norm at 1, set the step's learning rate from a
    warm-up + cosine schedule (20 steps of warm-up, fewer in a run of under 200), and let AdamW
    move every parameter.
    """
    from minitf import backend, data, models, optim
    from minitf.validate import check_int

    check_int(steps, "steps", "train_char_lm", what="the AdamW steps to train")
    backend.seed(seed)
    with backend.precision("float32"):
        lm = models.DecoderLM(vocab_size, d_model=48, n_heads=4, n_layers=2, max_len=256,
                              positional="rope")
        warmup = min(20, steps // 10)      # a short run (a quick test) warms up for a tenth
        adamw, schedule = optim.AdamW(lm, lr=1e-2), optim.WarmupCosine(1e-2, warmup, steps)
        for step in range(1, steps + 1):
            lm.zero_grad()                                 # backward adds into .grad
            _, backward = lm.loss(*data.random_windows(train_ids, 16, 32))
            backward()                                     # every parameter's ∂L/∂θ
            optim.clip_grad_norm(lm, 1.0)
            adamw.lr = schedule(step)
            adamw.step()
    return lm.to(dtype="float64")
