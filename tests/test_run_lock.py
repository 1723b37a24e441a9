"""The lock of a run directory: two runs that find a dead run's lock at the same instant cannot
both take it over, and one that dies, however it dies, keeps no later run out."""
import os
import subprocess
import sys

import pytest

from minitf import rundir

# A process that holds the lock of DIR for a second and says whether it got it. With "slow" it
# says "read" and waits a second each time it has read the lock's file: where the lock was that
# file alone, it read a dead run's number, waited, and then removed the lock the other process
# had taken since.
HOLDER = """
import sys, time
from minitf import rundir
directory, pace = sys.argv[1], sys.argv[2]
if pace == "slow":
    read = rundir.RunLock._owner
    def slow_owner(self):
        owner = read(self)
        print("read", flush=True)
        time.sleep(1)
        return owner
    rundir.RunLock._owner = slow_owner
try:
    with rundir.RunLock(directory):
        print("held", flush=True)
        time.sleep(2)
except rundir.RunDirectoryError as err:
    print("refused:", err, flush=True)
"""

posix = pytest.mark.skipif(os.name != "posix", reason="the lock the system ends (flock)")


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _holder(directory, pace):
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(directory), pace],
                            stdout=subprocess.PIPE, text=True)


@posix
def test_two_runs_taking_over_a_dead_run_s_lock_at_once_get_it_once(tmp_path):
    (tmp_path / rundir.LOCK).write_text(f"{_dead_pid()}\n")
    slow = _holder(tmp_path, "slow")
    assert slow.stdout.readline().strip() == "read"     # inside its second: the other comes now
    fast = _holder(tmp_path, "fast")
    said = [p.communicate(timeout=60)[0].strip().splitlines()[-1] for p in (slow, fast)]
    assert sorted(s.split(":")[0] for s in said) == ["held", "refused"], said
    assert "is in use by another minitf train (pid " in [s for s in said if s != "held"][0]
    assert not (tmp_path / rundir.LOCK).exists()           # removed by the one that held it


@posix
def test_a_run_killed_holding_the_lock_keeps_no_later_run_out(tmp_path):
    holder = _holder(tmp_path, "fast")
    assert holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait()
    assert (tmp_path / rundir.LOCK).read_text() == f"{holder.pid}\n"     # left behind
    with rundir.RunLock(tmp_path):
        assert (tmp_path / rundir.LOCK).read_text() == f"{os.getpid()}\n"
    assert not (tmp_path / rundir.LOCK).exists()
