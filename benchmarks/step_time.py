"""Forward + backward time of one training step, minitf against PyTorch on the same shapes.

    python benchmarks/step_time.py                  # NumPy vs torch on the CPU
    python benchmarks/step_time.py --backend cupy   # CuPy vs torch on the GPU (if present)

Prints the median of ``--repeats`` timed steps (after two warm-up steps) for an EncoderBlock and
for the whole default DecoderLM (forward, cross-entropy, backward).
"""
import argparse
import statistics
import time

from machine import device_wait

from minitf import backend
from minitf.models import DecoderLM
from minitf.nn import EncoderBlock


def _median_ms(step, repeats, sync=lambda: None):
    for _ in range(2):
        step()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def minitf_block(b, n, d, h, d_ff):
    block = EncoderBlock(d, h, d_ff)
    x = backend.randn(b, n, d)
    g = backend.randn(b, n, d)
    def step():
        block(x)
        block.backward(g)
    return step


def minitf_lm(b, n, vocab):
    model = DecoderLM(vocab, 128, 4, 4, max_len=n)
    ids = backend.randint(0, vocab, (b, n + 1))

    def step():
        model.zero_grad()
        _, backward = model.loss(ids[:, :-1], ids[:, 1:])
        backward()
    return step


def torch_steps(b, n, d, h, d_ff, vocab, device):
    import torch
    block = torch.nn.TransformerEncoderLayer(d, h, d_ff, dropout=0.0, batch_first=True).to(device)
    x = torch.randn(b, n, d, device=device, requires_grad=True)
    g = torch.randn(b, n, d, device=device)

    def block_step():
        block.zero_grad()
        block(x).backward(g)

    layers = torch.nn.ModuleList(torch.nn.TransformerEncoderLayer(
        128, 4, 512, dropout=0.0, activation=lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
        batch_first=True, norm_first=True) for _ in range(4)).to(device)
    emb = torch.nn.Embedding(vocab, 128).to(device)
    pos = torch.nn.Parameter(torch.zeros(n, 128, device=device))
    norm = torch.nn.LayerNorm(128).to(device)
    ids = torch.randint(0, vocab, (b, n + 1), device=device)
    mask = torch.triu(torch.ones(n, n, dtype=torch.bool, device=device), 1)

    def lm_step():
        for p in [*layers.parameters(), *emb.parameters(), pos, *norm.parameters()]:
            p.grad = None
        h_ = emb(ids[:, :-1]) + pos
        for layer in layers:
            h_ = layer(h_, src_mask=mask)
        logits = norm(h_) @ emb.weight.T
        torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), ids[:, 1:].reshape(-1)).backward()
    return block_step, lm_step


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=backend.BACKENDS, default="numpy")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    backend.use(args.backend)
    sync = device_wait(args.backend)
    device = "cuda" if args.backend == "cupy" else "cpu"
    b, n, d, h, d_ff, vocab = 32, 128, 128, 4, 512, 103
    rows = [("EncoderBlock(128, 4, 512), x (32, 128, 128)", _median_ms(minitf_block(b, n, d, h, d_ff), args.repeats, sync)),
            ("DecoderLM default, 32 × 128 tokens", _median_ms(minitf_lm(b, n, vocab), args.repeats, sync))]
    try:
        import torch
        torch_sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        block_step, lm_step = torch_steps(b, n, d, h, d_ff, vocab, device)
        theirs = [_median_ms(block_step, args.repeats, torch_sync), _median_ms(lm_step, args.repeats, torch_sync)]
    except ImportError:
        theirs = [float("nan")] * 2
    print(f"forward + backward, float32, median of {args.repeats}; minitf on {args.backend}, torch on {device}\n")
    print(f"{'':<46}{'minitf (ms)':>12}{'torch (ms)':>12}")
    for (name, ours), t in zip(rows, theirs):
        print(f"{name:<46}{ours:>12.1f}{t:>12.1f}")


if __name__ == "__main__":
    main()
