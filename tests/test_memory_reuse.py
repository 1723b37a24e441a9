"""minitf.backend.reuse_freed_memory: freed NumPy temporaries are reused, not faulted back in.

Each check runs in a fresh Python, since the allocator settings belong to the whole process: it
imports minitf, then 40 times makes four 3 MiB arrays and frees them, as a step makes and frees
its temporaries, and reports how many page faults that cost. Fresh from the OS, every array
would fault in its 768 pages; by default glibc hands the freed 12 MiB back to the OS."""
import json
import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                                reason="the setting is made with glibc's mallopt only")

CHILD = """
import json, resource
import numpy as np
import minitf.backend
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def step():
    temporaries = [np.ones(3 << 18, dtype=np.float32) for _ in range(4)]    # 3 MiB each
    del temporaries
step()
before = faults()
for _ in range(40):
    step()
print(json.dumps(faults() - before))
"""


def page_faults(**environment):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")} | environment
    result = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                            env=env, check=True)
    return json.loads(result.stdout)


def test_the_temporaries_a_step_frees_are_reused_by_the_next():
    assert page_faults() < 40 * 4 * 768 / 10


def _huge_pages_always() -> bool:
    """Transparent huge pages on for every mapping: a fresh 3 MiB array then faults in a few 2 MiB
    pages, not 768 small ones, and counting faults tells fresh memory from reused no more."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as setting:
            return "[always]" in setting.read()
    except OSError:
        return False


@pytest.mark.skipif(_huge_pages_always(), reason="transparent huge pages: few faults either way")
def test_the_users_own_allocator_setting_wins():
    # arrays over 128 KiB mapped fresh and unmapped when freed: every one faults
    assert page_faults(MALLOC_MMAP_THRESHOLD_="131072") > 40 * 4 * 768 / 2


def test_it_reports_that_the_settings_were_made():
    from minitf import backend
    assert backend.reuse_freed_memory() is True
