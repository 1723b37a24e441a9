"""benchmarks/vs_torch.py: its smoke run prints every row as it is measured and every table after
the two models agree, and it refuses to time models that disagree; benchmarks/step_profile.py: it
charges each function its own time and sees every call, of a training step or a forward,
minitf's or torch's. No speed is asserted: timings on a shared machine are not a test."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "vs_torch.py"
TITLES = ("### Training step", "### Forward only", "### KV-cache decoding", "### Peak memory")


def load(name):
    """A script of benchmarks/ as a module."""
    spec = importlib.util.spec_from_file_location(name, SCRIPT.parent / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow            # three Python processes importing torch: most of a minute
def test_quick_run_checks_the_models_then_prints_every_table():
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--threads", "1"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "tiny: same-loss check passed" in out
    assert "tiny: same-decoding check passed" in out
    # each row as soon as it is measured, before the tables: a run cut short keeps those
    early = out.split("### ", 1)[0]
    for what in ("train", "forward", "decode", "memory"):
        assert f"\ntiny: {what}: " in early, f"no early {what} row in\n{early}"
    for title in TITLES:
        table = out.split(title, 1)[1].split("###", 1)[0]          # from its title to the next
        rows = [line for line in table.splitlines() if line.startswith("| tiny")]
        assert len(rows) == 1, f"{title}: wanted one row for tiny in\n{table}"
    assert "AVX-512" in out and "command: python" in out and "threads: torch 1" in out


@pytest.fixture(scope="module")
def bench():
    return load("vs_torch")


def test_a_model_that_differs_is_refused(bench):
    config = bench.CONFIGS["tiny"]
    ours, theirs = bench.build(config, 20)
    torch.manual_seed(0)     # fixed ids: on some draws a 1 % change moves the loss by < 1e-5
    ids = torch.randint(0, 20, (2, config.n + 1)).numpy()
    assert "passed" in bench.check_same_loss(ours, theirs, ids[:, :-1], ids[:, 1:])
    with torch.no_grad():
        theirs.blocks[1].linear2.weight.mul_(1.01)                 # one weight, one percent off
    with pytest.raises(SystemExit, match="same-loss check FAILED"):
        bench.check_same_loss(ours, theirs, ids[:, :-1], ids[:, 1:])
    prompt = ids[:1, :1]
    with pytest.raises(SystemExit, match="same-decoding check FAILED"):
        bench.check_same_decoding(ours, theirs, prompt)


def test_torch_turns_q_and_k_as_minitf_does(bench):
    """With RoPE torch's blocks run by hand; they must give minitf's loss and cached logits, and
    turning the other way (e^{−iθ}) must be caught."""
    config = load("configs").Config(16, 2, 2, 12, 3, "rope")
    ours, theirs = bench.build(config, 20)
    assert theirs.pos is None and "pos_emb.W" not in dict(ours.named_parameters())
    torch.manual_seed(0)
    ids = torch.randint(0, 20, (config.batch, config.n + 1)).numpy()
    assert "passed" in bench.check_same_loss(ours, theirs, ids[:, :-1], ids[:, 1:])
    assert "passed" in bench.check_same_decoding(ours, theirs, ids[:1, :2])
    theirs.turns = theirs.turns.conj()
    with pytest.raises(SystemExit, match="same-loss check FAILED"):
        bench.check_same_loss(ours, theirs, ids[:, :-1], ids[:, 1:])


def test_the_floor_has_two_backward_products_per_forward_one(bench):
    config = bench.CONFIGS["tiny"]
    forward = bench.matmul_shapes(config, 100, backward=False)
    assert len(forward) == 6 * config.n_layers + 1
    everything = bench.matmul_shapes(config, 100)
    assert len(everything) == 3 * len(forward)
    for a, b in everything:                                         # every product is well formed
        assert a[:-2] == b[:-2] and a[-1] == b[-2]


def test_the_step_profile_counts_a_callee_once_in_its_caller_only():
    import time
    profile = load("step_profile").Profile(wait=lambda: None)
    # outer's own 10 ms against inner's 60: a busy machine may oversleep by tens of ms
    inner = profile.timed(lambda: time.sleep(0.06), "inner")
    outer = profile.timed(lambda: (inner(), time.sleep(0.01)), "outer")
    outer()
    assert profile.calls == {"inner": 1, "outer": 1}
    assert profile.inclusive["outer"] >= 0.07 and profile.inclusive["inner"] >= 0.06
    assert profile.exclusive["outer"] < 0.06 <= profile.exclusive["inner"]
    assert abs(profile.exclusive["outer"] + profile.exclusive["inner"]
               - profile.inclusive["outer"]) < 1e-9


def profiled_calls(*options):
    """{function or op: calls per step} from step_profile.py's table for the tiny config."""
    done = subprocess.run([sys.executable, str(SCRIPT.parent / "step_profile.py"), "--config",
                           "tiny", "--steps", "2", "--top", "100", *options],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return {line.split("`")[1]: int(line.rsplit("|", 2)[1])
            for line in done.stdout.splitlines() if line.startswith("| `")}


def test_the_step_profile_sees_every_linear_layer_and_one_optimizer_step():
    calls = profiled_calls()
    n_layers = load("vs_torch").CONFIGS["tiny"].n_layers
    # q, k, v fused, the output projection and the two of the MLP per block, and the LM head
    assert calls["functional.linear.linear"] == calls["functional.linear.linear_backward"] \
        == 4 * n_layers + 1
    assert calls["optim.AdamW.step"] == 1


def test_the_forward_profile_has_no_backward_and_no_optimizer_step():
    calls = profiled_calls("--forward")
    n_layers = load("vs_torch").CONFIGS["tiny"].n_layers
    assert calls["functional.linear.linear"] == 4 * n_layers + 1
    assert not [label for label in calls if "backward" in label or "AdamW" in label]


def test_the_torch_profile_counts_torch_ops_of_the_same_model():
    calls = profiled_calls("--forward", "--torch", "--threads", "1")
    n_layers = load("vs_torch").CONFIGS["tiny"].n_layers
    # four linear maps a block (q k v fused, output, the MLP's two); the tied head is one matmul
    assert calls["aten::linear"] == 4 * n_layers
    assert calls["aten::scaled_dot_product_attention"] == n_layers
    assert not [op for op in calls if "backward" in op]


def test_the_header_warns_when_two_thread_pools_fill_every_core(bench, monkeypatch):
    """Two libraries with as many threads each as there are cores slow each other's steps down in
    one process (their idle threads spin): the header says so, and says nothing at one thread or
    where cores are to spare."""
    machine = sys.modules["machine"]
    monkeypatch.setattr(machine.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(bench.torch, "get_num_threads", lambda: 2)
    notes = [line for line in bench.environment(10, 3, 100) if line.startswith("note:")]
    assert notes == ["note: 2 threads each on 2 cores: each library's idle threads slow the "
                     "other's next step, and single rounds spread widely; one thread each "
                     "compares them fairly"]
    for threads, cores in ((1, {0, 1}), (1, {0}), (2, {0, 1, 2, 3})):
        monkeypatch.setattr(bench.torch, "get_num_threads", lambda: threads)
        monkeypatch.setattr(machine.os, "sched_getaffinity", lambda pid: cores, raising=False)
        assert not any(line.startswith("note:") for line in bench.environment(10, 3, 100))


@pytest.mark.slow            # the parity tests once more, in a process of their own
def test_the_parity_errors_are_every_comparison_by_group_and_under_the_tests_tolerance():
    done = subprocess.run([sys.executable, str(SCRIPT.parent / "parity_errors.py")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {line.split(" | ")[0].strip("|* "): line.strip("| ").split(" | ")[1:]
            for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line}
    groups = ("DecoderLM, whole model", "EncoderLM (BERT), whole model",
              "recurrent layers and RNNLM", "layers, attention and blocks")
    tests = [name for name in rows if name.startswith("test_")]
    # every comparison lands in exactly one group
    assert sum(int(rows[g][0]) for g in groups) == sum(int(rows[t][0]) for t in tests) > 600
    for name in (*groups, *tests):
        # float64 is measured in every test ("—" only where a test has no float32 comparison);
        # 0 is a real measurement: a linear layer can agree with torch's to the last bit
        assert rows[name][1] != "—", f"{name}: {rows[name]}"
        f64, f32 = (float(e) if e != "—" else 0.0 for e in rows[name][1:])
        assert 0 <= f64 <= 1e-9 and f32 <= 1e-4, f"{name}: {rows[name]}"
