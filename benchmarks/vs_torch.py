"""minitf against PyTorch (CPU, eager), on the same model with identical weights, in one process.

    python benchmarks/vs_torch.py                       # every config, 10 pairs
    python benchmarks/vs_torch.py --threads 1           # one BLAS thread and one torch thread
    python benchmarks/vs_torch.py --configs ref,long --pairs 20
    python benchmarks/vs_torch.py --quick               # smoke run: tiny only, 2 pairs, < 1 min

The model is `minitf train`'s DecoderLM (pre-LN, tanh-GELU, learned positions, tied head), float32;
torch runs the same model built from its own layers, with minitf's weights copied in. Measures:
training step (with AdamW), forward only, KV-cache decoding per token, peak memory of training
(fresh process each), and the BLAS floor: NumPy alone doing the step's matrix products. Timing
alternates minitf, torch and the floor, round after round; nothing is timed unless both models
give the same loss and the same decoding logits. benchmarks/RESULTS.md explains every column.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from collections import namedtuple
from statistics import median

# --threads must reach the BLAS before NumPy loads it: OpenBLAS and MKL read these variables
# once, at load time. threadpoolctl (if installed) then also sets the pool at run time and
# reports what the BLAS really uses; torch.set_num_threads sets torch's own pool.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def threads_in_argv():
    """The N of --threads N (or --threads=N), read before argparse runs: see above."""
    for i, arg in enumerate(sys.argv[:-1]):
        if arg == "--threads":
            return sys.argv[i + 1]
    return next((arg.split("=", 1)[1] for arg in sys.argv if arg.startswith("--threads=")), None)


if threads_in_argv():
    os.environ.update(dict.fromkeys(THREAD_VARIABLES, threads_in_argv()))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from minitf import backend  # noqa: E402
from minitf.generate import generate  # noqa: E402
from minitf.gradcheck import relative_error  # noqa: E402
from minitf.models import DecoderLM  # noqa: E402
from minitf.optim import AdamW  # noqa: E402

try:
    import threadpoolctl
except ImportError:
    threadpoolctl = None

Config = namedtuple("Config", "d_model n_layers n_heads n batch")
CONFIGS = {
    "tiny": Config(64, 2, 4, 64, 8),
    "small": Config(128, 2, 4, 128, 16),
    "ref": Config(256, 4, 4, 128, 16),
    "long": Config(256, 4, 4, 512, 4),
    "default": Config(128, 2, 4, 64, 52),       # `minitf train`: RunConfig's defaults
}
DECODE_CONFIGS = ("ref", "default")
DECODE_AT = (64, 256)      # report the time per token near these tokens
WINDOW = 8                 # ... as the median of the WINDOW tokens ending there (one is too noisy)
LR, BETAS, WEIGHT_DECAY = 6e-3, (0.9, 0.95), 0.1     # `minitf train`'s AdamW
LOSS_TOLERANCE, LOGITS_TOLERANCE = 1e-5, 1e-4


# -- the same model in torch ---------------------------------------------------------------------

def gelu_tanh(x):
    return torch.nn.functional.gelu(x, approximate="tanh")


class TorchLM(torch.nn.Module):
    """minitf's DecoderLM from torch parts: token embedding + learned positions, pre-LN causal
    TransformerEncoderLayers with tanh-GELU, a final LayerNorm, the head tied to the embedding."""

    def __init__(self, vocab, d_model, n_heads, n_layers, d_ff, max_len):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d_model)
        self.pos = torch.nn.Parameter(torch.zeros(max_len, d_model))
        self.blocks = torch.nn.ModuleList(torch.nn.TransformerEncoderLayer(
            d_model, n_heads, d_ff, dropout=0.0, activation=gelu_tanh, batch_first=True,
            norm_first=True) for _ in range(n_layers))
        self.norm = torch.nn.LayerNorm(d_model)

    def forward(self, ids):
        n = ids.shape[1]
        mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)   # True: masked out
        x = self.tok(ids) + self.pos[:n]
        for block in self.blocks:
            # is_causal: torch may then skip the mask and run its causal attention kernel
            x = block(x, src_mask=mask, is_causal=True)
        return self.norm(x) @ self.tok.weight.T


def weight_pairs(theirs):
    """(minitf parameter name, torch parameter, transposed?) for every parameter. minitf keeps a
    linear map's W as (d_in, d_out), torch as (d_out, d_in); both stack q, k, v as [q | k | v]."""
    pairs = [("tok_emb.W", theirs.tok.weight, False), ("pos_emb.W", theirs.pos, False),
             ("norm.gamma", theirs.norm.weight, False), ("norm.beta", theirs.norm.bias, False)]
    for i, layer in enumerate(theirs.blocks):
        at, mha = f"blocks.blocks.{i}.", layer.self_attn
        for name, W, b in (("self_attn.layer.W_qkv", mha.in_proj_weight, mha.in_proj_bias),
                           ("self_attn.layer.W_o", mha.out_proj.weight, mha.out_proj.bias),
                           ("ffn.layer.W_1", layer.linear1.weight, layer.linear1.bias),
                           ("ffn.layer.W_2", layer.linear2.weight, layer.linear2.bias)):
            pairs += [(f"{at}{name}.W", W, True), (f"{at}{name}.b", b, False)]
        for name, norm in (("self_attn.norm", layer.norm1), ("ffn.norm", layer.norm2)):
            pairs += [(f"{at}{name}.gamma", norm.weight, False),
                      (f"{at}{name}.beta", norm.bias, False)]
    return pairs


def build(config, vocab):
    """The two models, minitf's weights (seed 0) copied into torch's."""
    backend.seed(0)
    max_len = max(config.n, 1 + DECODE_AT[-1])
    ours = DecoderLM(vocab, config.d_model, config.n_heads, config.n_layers, max_len=max_len)
    theirs = TorchLM(vocab, config.d_model, config.n_heads, config.n_layers, ours.config["d_ff"],
                     max_len)
    params, pairs = dict(ours.named_parameters()), weight_pairs(theirs)
    if sorted(name for name, _, _ in pairs) != sorted(params) \
            or len(pairs) != len(list(theirs.parameters())):
        raise SystemExit("the weight map does not cover both models' parameters one to one")
    with torch.no_grad():
        for name, tensor, transposed in pairs:
            W = backend.to_numpy(params[name].data)
            tensor.copy_(torch.from_numpy(np.ascontiguousarray(W.T if transposed else W)))
    return ours, theirs


def optimizers(ours, theirs):
    """AdamW with `minitf train`'s settings, decaying the linear maps' weights only, as minitf's."""
    linear = {id(tensor) for _, tensor, transposed in weight_pairs(theirs) if transposed}
    groups = [{"params": [p for p in theirs.parameters() if (id(p) in linear) == decay],
               "weight_decay": WEIGHT_DECAY if decay else 0.0} for decay in (True, False)]
    return (AdamW(ours, LR, betas=BETAS, weight_decay=WEIGHT_DECAY),
            torch.optim.AdamW(groups, lr=LR, betas=BETAS))


# -- the measured steps --------------------------------------------------------------------------

def steps(ours, theirs, x, y):
    """{measure: (minitf step, torch step)} for a teacher-forcing batch x, y (b, n), host arrays
    moved to each model's device."""
    tx, ty = on_device_of(theirs, x, y)
    x, y = backend.to_device(x), backend.to_device(y)
    optimizer, torch_optimizer = optimizers(ours, theirs)

    def minitf_train():
        ours.zero_grad()
        _, backward = ours.loss(x, y)
        backward()
        optimizer.step()

    def torch_train():
        torch_optimizer.zero_grad()
        torch.nn.functional.cross_entropy(theirs(tx).flatten(0, 1), ty.flatten()).backward()
        torch_optimizer.step()

    def minitf_forward():
        ours(x)

    @torch.no_grad()
    def torch_forward():
        theirs(tx)

    return {"train": (minitf_train, torch_train), "forward": (minitf_forward, torch_forward)}


def on_device_of(theirs, *arrays):
    """Host arrays as torch tensors on the device of the torch model ``theirs``."""
    device = theirs.tok.weight.device
    return [torch.from_numpy(a).to(device) for a in arrays]


def no_sync():
    """On the CPU every step has finished when it returns: nothing to wait for."""


def minitf_decode(ours, prompt, n_tokens, sync=no_sync):
    """Seconds per new token of minitf's cached greedy generation, (n_tokens,). ``sync`` waits
    for the device, so that each token is stamped when it is done, not when it is queued."""
    stamps = [time.perf_counter()]

    def stamp(ids):
        sync()
        stamps.append(time.perf_counter())
    generate(ours, backend.to_device(prompt), n_tokens, greedy=True, on_token=stamp)
    return np.diff(stamps)


@torch.no_grad()
def torch_decode(theirs, prompt, n_tokens, forced=None, sync=no_sync):
    """Greedy generation with a KV cache over the torch layers' weights: each step runs the blocks
    on the new token only, and writes its keys and values in place into each layer's cache, here
    allocated once for the whole context (minitf's KVCache doubles its buffer when full): neither
    copies the whole cache at every token.
    prompt: (b, n0) ids;  forced: (b, n_tokens) tokens to feed instead of the argmax (the check)
    -> seconds per token (n_tokens,), the logits of every step (b, n_tokens, V)"""
    b, d_model = prompt.shape[0], theirs.tok.embedding_dim
    h = theirs.blocks[0].self_attn.num_heads
    cache = torch.zeros(len(theirs.blocks), 2, b, h, len(theirs.pos), d_model // h,
                        device=theirs.tok.weight.device)                       # k and v
    (new,), offset, stamps, logits = on_device_of(theirs, prompt), 0, [time.perf_counter()], []
    forced = None if forced is None else on_device_of(theirs, forced)[0]
    for t in range(n_tokens):
        n = new.shape[1]
        x = theirs.tok(new) + theirs.pos[offset:offset + n]                  # (b, n, d_model)
        for i, layer in enumerate(theirs.blocks):
            attention = layer.self_attn
            qkv = torch.nn.functional.linear(layer.norm1(x), attention.in_proj_weight,
                                             attention.in_proj_bias)      # (b, n, 3 d_model)
            q, k, v = qkv.view(b, n, 3, h, d_model // h).permute(2, 0, 3, 1, 4)  # (b, h, n, d_head)
            cache[i, 0, :, :, offset:offset + n], cache[i, 1, :, :, offset:offset + n] = k, v
            k, v = cache[i, :, :, :, :offset + n]                    # (b, h, offset + n, d_head)
            # only the prompt needs the causal mask: a single new token may see every cached one
            context = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=n > 1)
            x = x + attention.out_proj(context.transpose(1, 2).reshape(b, n, d_model))
            x = x + layer.linear2(gelu_tanh(layer.linear1(layer.norm2(x))))
        last = theirs.norm(x[:, -1]) @ theirs.tok.weight.T                   # (b, V)
        logits.append(last)
        new = (last.argmax(-1) if forced is None else forced[:, t])[:, None]
        offset += n
        sync()
        stamps.append(time.perf_counter())
    return np.diff(stamps), torch.stack(logits, dim=1).cpu().numpy()


def per_token_at(seconds):
    """{k: the median time of the WINDOW tokens ending at token k} for k in DECODE_AT."""
    return {k: median(seconds[k - WINDOW:k]) for k in DECODE_AT}


# -- the checks: no figure unless the two compute the same thing --------------------------------

def check_same_loss(ours, theirs, x, y):
    ours_loss, _ = ours.loss(backend.to_device(x), backend.to_device(y))
    tx, ty = on_device_of(theirs, x, y)
    with torch.no_grad():
        theirs_loss = float(torch.nn.functional.cross_entropy(theirs(tx).flatten(0, 1),
                                                              ty.flatten()))
    difference = abs(ours_loss - theirs_loss) / abs(theirs_loss)
    losses = f"minitf {ours_loss:.7f}, torch {theirs_loss:.7f}, rel. difference {difference:.1e}"
    if not difference <= LOSS_TOLERANCE:
        raise SystemExit(f"same-loss check FAILED: {losses} > {LOSS_TOLERANCE:.0e}; the models "
                         f"differ, so no timing is reported")
    return f"same-loss check passed: {losses}"


def check_same_decoding(ours, theirs, prompt, n_tokens=32):
    ids, ours_logits = generate(ours, backend.to_device(prompt), n_tokens, greedy=True,
                                return_logits=True)
    ids, ours_logits = backend.to_numpy(ids), backend.to_numpy(ours_logits)
    _, theirs_logits = torch_decode(theirs, prompt, n_tokens, forced=ids[:, prompt.shape[1]:])
    error = relative_error(ours_logits, theirs_logits)
    if not error <= LOGITS_TOLERANCE:
        raise SystemExit(f"same-decoding check FAILED: the logits of {n_tokens} cached steps "
                         f"differ by {error:.1e} > {LOGITS_TOLERANCE:.0e}; no timing is reported")
    return f"same-decoding check passed: {n_tokens} cached steps, logits rel. error {error:.1e}"


# -- the BLAS floor ------------------------------------------------------------------------------

def matmul_shapes(config, vocab, backward=True):
    """(a, b) shapes of every product a @ b of one step: per block q,k,v; q kᵀ; P v; W_o; W_1;
    W_2; then the head. Each has two in the backward, dA = dY Bᵀ and dB = Aᵀ dY."""
    d, h, n, m = config.d_model, config.n_heads, config.n, config.batch * config.n
    heads = (config.batch, h)
    block = [((m, d), (d, 3 * d)), ((*heads, n, d // h), (*heads, d // h, n)),
             ((*heads, n, n), (*heads, n, d // h)), ((m, d), (d, d)), ((m, d), (d, 4 * d)),
             ((m, 4 * d), (4 * d, d))]
    forward = block * config.n_layers + [((m, d), (d, vocab))]
    if not backward:
        return forward
    back = []
    for (*batch, i, k), (*_, j) in forward:
        back += [((*batch, i, j), (*batch, j, k)), ((*batch, k, i), (*batch, i, j))]
    return forward + back


def floor_step(shapes):
    """A step of matmuls alone (NumPy's, or CuPy's on the GPU), on random float32 operands made
    once, written into `out`. The operands are drawn where they are used: for a large config
    they are gigabytes, which the host would take minutes to draw, multiply and copy."""
    xp = backend.get_array_module()
    rng = xp.random.default_rng(0)
    operands = [(rng.standard_normal(a, dtype=xp.float32), rng.standard_normal(b, dtype=xp.float32))
                for a, b in shapes]
    operands = [(a, b, a @ b) for a, b in operands]

    def step():
        for a, b, out in operands:
            xp.matmul(a, b, out=out)
    return step


# -- running and reporting -----------------------------------------------------------------------

def alternate(contestants, rounds, warmup):
    """Run the contestants in turn, warmup + rounds times; -> {name: [its result per round]}.
    A contestant returns its own measurement, or None to be timed whole (seconds)."""
    results = {name: [] for name in contestants}
    for r in range(warmup + rounds):
        for name, run in contestants.items():
            start = time.perf_counter()
            value = run()
            if r >= warmup:
                results[name].append(time.perf_counter() - start if value is None else value)
    return results


def compare(ours, theirs):
    """Cells: minitf's and torch's median in ms, and the ratio minitf/torch, median (min–max)."""
    ratios = [a / b for a, b in zip(ours, theirs)]
    return [f"{1e3 * median(ours):.2f}", f"{1e3 * median(theirs):.2f}",
            f"{median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f})"]


def rss_kib(field):
    """VmRSS (the RSS now) or VmHWM (its peak since the last reset), KiB; Linux only."""
    with open("/proc/self/status") as status:
        return int(dict(line.split(":", 1) for line in status)[field].split()[0])


def memory_child(framework, name, vocab):
    """In a fresh process: print the extra RSS (MiB) that two training steps of one framework
    need, above the RSS with both models built, just before the first step."""
    config = CONFIGS[name]
    ours, theirs = build(config, vocab)
    ids = backend.to_numpy(backend.randint(0, vocab, (config.batch, config.n + 1)))
    step = steps(ours, theirs, ids[:, :-1], ids[:, 1:])["train"][framework == "torch"]
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")          # reset the peak to now: importing torch peaked higher already
    before = rss_kib("VmRSS")
    step()
    step()                                                         # now with optimizer state
    print(json.dumps((rss_kib("VmHWM") - before) / 1024))


def peak_memory(framework, name, args):
    argv = [sys.executable, __file__, "--memory-child", framework, name, "--vocab", str(args.vocab)]
    argv += ["--threads", str(args.threads)] if args.threads else []
    return float(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)


def environment(rounds, warmup, vocab):
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    cpu = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines()
                if line.startswith("Model name")), "unknown")
    with open("/proc/cpuinfo") as cpuinfo:
        avx512 = "yes" if " avx512f" in cpuinfo.read() else "no"
    if threadpoolctl is not None:
        blas = ", ".join(f"{pool['internal_api']} {pool.get('version') or ''} "
                         f"({pool['num_threads']} threads)"
                         for pool in threadpoolctl.threadpool_info())
    else:
        blas = "threadpoolctl not installed; " + ", ".join(
            f"{variable}={os.environ.get(variable, 'unset')}" for variable in THREAD_VARIABLES)
    return [f"CPU: {cpu} (AVX-512: {avx512}), {os.cpu_count()} logical cores",
            f"NumPy {np.__version__}, torch {torch.__version__}, float32, vocabulary {vocab}",
            f"threads: torch {torch.get_num_threads()}; BLAS: {blas}",
            f"{rounds} timed rounds after {warmup} warm-up rounds",
            f"command: python {shlex.join(sys.argv)}"]


def measure(name, args, rounds, warmup, decode, rows):
    """Check, then time one config; append its row to each table of ``rows``."""
    config = CONFIGS[name]
    shape = f"{name}: d {config.d_model}, {config.n_layers}×{config.n_heads} heads, " \
            f"{config.batch} × {config.n}"
    ours, theirs = build(config, args.vocab)
    ids = backend.to_numpy(backend.randint(0, args.vocab, (config.batch, config.n + 1)))
    x, y = ids[:, :-1], ids[:, 1:]
    prompt = backend.to_numpy(backend.randint(0, args.vocab, (1, 1)))
    print(f"{name}: {check_same_loss(ours, theirs, x, y)}")
    if decode:
        print(f"{name}: {check_same_decoding(ours, theirs, prompt)}")
    for what, (ours_step, theirs_step) in steps(ours, theirs, x, y).items():
        ours.train(what == "train")
        theirs.train(what == "train")
        floor = floor_step(matmul_shapes(config, args.vocab, backward=what == "train"))
        t = alternate({"minitf": ours_step, "torch": theirs_step, "floor": floor}, rounds, warmup)
        floor_s = median(t["floor"])
        rows[what].append([shape, *compare(t["minitf"], t["torch"]), f"{1e3 * floor_s:.2f}",
                           f"{median(t['minitf']) / floor_s:.1f}",
                           f"{median(t['torch']) / floor_s:.1f}"])
    if decode:
        n_tokens = DECODE_AT[-1]
        t = alternate({"minitf": lambda: per_token_at(minitf_decode(ours, prompt, n_tokens)),
                       "torch": lambda: per_token_at(torch_decode(theirs, prompt, n_tokens)[0])},
                      rounds, warmup)
        rows["decode"].append([name] + [cell for k in DECODE_AT for cell in
                                        compare([r[k] for r in t["minitf"]],
                                                [r[k] for r in t["torch"]])])
    ours_mib, theirs_mib = (peak_memory(framework, name, args) for framework in ("minitf", "torch"))
    rows["memory"].append([shape, f"{ours_mib:.1f}", f"{theirs_mib:.1f}",
                           f"{ours_mib / theirs_mib:.2f}"])


def table(title, header, rows):
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


TIMED = ["config", "minitf (ms)", "torch (ms)", "minitf/torch, median (min–max)",
         "BLAS floor (ms)", "minitf/floor", "torch/floor"]
TABLES = {  # measure: (title, header)
    "train": ("Training step: forward, loss, backward, AdamW", TIMED),
    "forward": ("Forward only: logits, no gradient", TIMED),
    "decode": (f"KV-cache decoding, batch 1, greedy: ms per token, median of the {WINDOW} tokens "
               f"up to token k", ["config"] + [f"{what} @ {k}" for k in DECODE_AT
                                               for what in ("minitf", "torch", "minitf/torch")]),
    "memory": ("Peak memory of training: peak RSS over two steps minus RSS before the first, "
               "fresh process each", ["config", "minitf (MiB)", "torch (MiB)", "minitf/torch"]),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default=",".join(CONFIGS),
                        help="comma-separated, of: " + ", ".join(CONFIGS))
    parser.add_argument("--pairs", type=int, default=10, help="timed rounds (default 10)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds first (default 3)")
    parser.add_argument("--vocab", type=int, default=100, help="vocabulary size (default 100)")
    parser.add_argument("--threads", type=int, help="torch and BLAS threads (default: theirs)")
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny only, 2 rounds")
    parser.add_argument("--memory-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads:      # torch's pool; the BLAS's at run time too with threadpoolctl (see top)
        torch.set_num_threads(args.threads)
        if threadpoolctl is not None:
            threadpoolctl.threadpool_limits(args.threads)
    if args.memory_child:
        return memory_child(*args.memory_child, args.vocab)
    names = ["tiny"] if args.quick else args.configs.split(",")
    if not set(names) <= set(CONFIGS):
        parser.error(f"--configs: wanted some of {list(CONFIGS)}; got {names}")
    rounds, warmup = (2, 1) if args.quick else (args.pairs, args.warmup)
    header = environment(rounds, warmup, args.vocab)
    rows = {what: [] for what in TABLES}
    for name in names:
        measure(name, args, rounds, warmup, args.quick or name in DECODE_CONFIGS, rows)
    print("\n" + "\n".join(f"- {line}" for line in header))
    for what, (title, columns) in TABLES.items():
        print("\n" + table(title, columns, rows[what]))


if __name__ == "__main__":
    main()
