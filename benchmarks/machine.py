"""The machine a figure was taken on: its CPU, in the words benchmarks/RESULTS.md uses (Linux:
lscpu and /proc/cpuinfo; elsewhere "unknown"), and the variables that set the BLAS's threads.
Imports no NumPy, so a script can set those variables before NumPy loads its BLAS."""
import os
import subprocess

# OpenBLAS, MKL and OpenMP read these once, when NumPy loads them: set them before that
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


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
