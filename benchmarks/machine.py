"""The machine a figure was taken on: its CPU, in the words benchmarks/RESULTS.md uses (Linux:
lscpu and /proc/cpuinfo; elsewhere "unknown"), the variables that set the BLAS's threads and
kernels, and the BLAS as it runs. Imports no NumPy, so a script can set those variables before
NumPy loads its BLAS."""
import os
import subprocess

# OpenBLAS, MKL and OpenMP read these once, when NumPy loads them: set them before that
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
# OpenBLAS picks its kernels for the CPU it finds when it loads, unless this variable names them:
# on the AMD EPYC with AVX-512 of benchmarks/RESULTS.md, where the machine's environment named
# its AVX2 ("Haswell") kernels, its own choice (SkylakeX) ran the products 1.9 x as fast
KERNEL_VARIABLE = "OPENBLAS_CORETYPE"


def cpu_line():
    """e.g. "AMD EPYC (AVX-512: no), 2 logical cores". AVX-512 is named because NumPy, OpenBLAS
    and torch all run wider kernels where it is there: the same code's speed differs by it."""
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        with open("/proc/cpuinfo") as cpuinfo:
            avx512 = "yes" if " avx512f" in cpuinfo.read() else "no"
    except OSError:
        lscpu, avx512 = "", "unknown"
    cpu = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines()
                if line.startswith("Model name")), "unknown")
    return f"{cpu} (AVX-512: {avx512}), {os.cpu_count()} logical cores"


def blas_line():
    """e.g. "openblas 0.3.31.188.0, Haswell kernels, 1 thread(s)": the matrix library NumPy
    loaded, which kernels it runs (the same CPU can run AVX2 or AVX-512 ones, at up to twice the
    speed), and its threads; read with threadpoolctl, after NumPy is imported."""
    try:
        import threadpoolctl
    except ImportError:
        return "threadpoolctl not installed; " + ", ".join(
            f"{variable}={os.environ.get(variable, 'unset')}"
            for variable in (*THREAD_VARIABLES, KERNEL_VARIABLE))
    pools = [f"{pool['internal_api']} {pool.get('version') or ''}".rstrip()
             + (f", {pool['architecture']} kernels" if pool.get("architecture") else "")
             + f", {pool['num_threads']} thread(s)"
             for pool in threadpoolctl.threadpool_info()]
    chosen = os.environ.get(KERNEL_VARIABLE)
    return "; ".join(pools) + (f" ({KERNEL_VARIABLE}={chosen})" if chosen else "")


def device_wait(backend_name):
    """A function that waits until the GPU has finished all the work queued so far (CuPy only
    queues it, so a timer stopped without the wait times the queueing); on NumPy, one that does
    nothing."""
    if backend_name != "cupy":
        return lambda: None
    import cupy
    return cupy.cuda.get_current_stream().synchronize


def contention_line(threads):
    """A warning for the header of a comparison that runs two libraries with ``threads`` threads
    each in one process, when they have no more cores than that: after each call a pool's idle
    threads spin for a while, and on a machine with no spare core they slow the other library's
    next step down (benchmarks/RESULTS.md, eighteenth entry). None when there is room."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if threads < 2 or threads < (cores or 1):
        return None
    return (f"{threads} threads each on {cores} cores: each library's idle threads slow the "
            f"other's next step, and single rounds spread widely; one thread each compares "
            f"them fairly")
