"""The run directory ``minitf train --out DIR`` writes to: found usable before training starts, and
written by one run at a time.

    probe(out)           --out is a file, cannot be created, is not writable, or its disk is full:
                         one line now, not a lost run after an hour of training
    with RunLock(out):   DIR/lock, locked by the run writing there, holds its PID; a second run
                         refuses, a lock left by a run that died (SIGKILL, power cut) is taken
                         over, and a file named lock holding no process number is refused, not
                         removed

and the two writes every save of minitf is built from (a checkpoint, a tokenizer, a grade report):
    write_durably(path, data)    a new file, on the disk when the call returns
    fsync_directory(directory)   a rename inside ``directory``, on the disk when the call returns
"""
from __future__ import annotations

import os
from pathlib import Path

try:
    import fcntl                # POSIX: a lock the system ends with its process
except ImportError:             # Windows
    fcntl = None

PROBE_BYTES = 1 << 16       # written and fsynced: a full disk fails this, not the first save
LOCK = "lock"


def write_durably(path, data: bytes) -> None:
    """Write ``data`` to the new file ``path`` and wait until the disk holds it: only then may a
    rename or a list point at it (a power cut after a plain write can leave it empty)."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def fsync_directory(path) -> None:
    """Make a rename inside ``path`` durable (POSIX; Windows has no directory handles to sync)."""
    if os.name == "posix":
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class RunDirectoryError(ValueError):
    """The output directory cannot be used: not writable, full, or in use by another run."""


def probe(directory, flag: str = "--out") -> Path:
    """Create ``directory`` if needed and write a small temporary file there. -> the directory"""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise RunDirectoryError(f"{flag} {directory} is a file; wanted a directory (created if "
                                f"missing)")
    temporary = directory / f".probe.{os.getpid()}.tmp"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        try:
            write_durably(temporary, bytes(PROBE_BYTES))
        finally:
            temporary.unlink(missing_ok=True)
    except OSError as err:
        raise RunDirectoryError(f"{flag} {directory}: cannot write there ({err.strerror}); "
                                f"wanted a writable directory with free space") from None
    return directory


def alive(pid: int) -> bool:
    """Whether a process of id ``pid`` runs (on POSIX; elsewhere it is taken to)."""
    if pid == os.getpid():
        return True
    if os.name != "posix":
        return True                 # no cheap probe: trust the lock (the message says what to do)
    try:
        os.kill(pid, 0)             # signal 0: is there such a process? (sends nothing)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True                 # it exists, under another user
    return True


class RunLock:
    """``with RunLock(directory):`` -- hold ``directory/lock``, which names this process, while
    the run writes there.

    On POSIX the lock is the operating system's (flock) on that file: it ends with the process,
    however that dies, so a run killed by SIGKILL or a power cut leaves nothing that keeps the
    next one out, and two runs that find a dead run's file at the same instant cannot both take
    it (each asks the system, not the file). The process number inside is for the message. A
    file named lock that holds no process number is someone's own, refused and left as it is.
    Elsewhere (Windows) the file is created with O_EXCL, and a lock whose process is gone is
    taken over."""

    def __init__(self, directory, flag: str = "--out"):
        self.path, self.flag, self.fd = Path(directory) / LOCK, flag, None

    def _owner(self) -> int | None:
        try:
            text = self.path.read_bytes().decode("ascii")
        except FileNotFoundError:
            return None             # vanished: its run ended
        except (OSError, UnicodeDecodeError):               # a folder, unreadable, not text
            text = "?"
        text = text.strip("\0 \t\n")    # a power cut can leave the file's length, in NULs
        if text and not text.isdigit():                     # not a PID: someone's own file
            raise RunDirectoryError(f"{self.flag} {self.path.parent}: its file {LOCK} is not a "
                                    f"minitf run's lock (a process number), and is left as it "
                                    f"is; wanted another {self.flag}, or that file moved away")
        return int(text) if text else None              # a lock cut short as its writer died

    def _in_use(self, owner: int | None) -> RunDirectoryError:
        pid = f" (pid {owner})" if owner is not None else ""
        return RunDirectoryError(f"{self.flag} {self.path.parent} is in use by another minitf "
                                 f"train{pid}; wait for it, or choose another {self.flag} (if no "
                                 f"run uses it, delete {self.path})")

    def __enter__(self) -> "RunLock":
        if fcntl is None:
            return self._enter_by_process_number()
        for _ in range(3):          # again if the file was replaced as this one was locked
            self._owner()           # someone's own file named lock: refused before it is opened
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise self._in_use(self._owner()) from None
            try:                    # the run that held it removed the file as it ended
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            self.fd = fd
            return self
        raise RunDirectoryError(f"{self.flag} {self.path.parent}: another run took its lock "
                                f"just now; wait for it, or choose another {self.flag}")

    def _enter_by_process_number(self) -> "RunLock":
        for _ in range(2):          # the second try follows taking over a dead run's lock
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = self._owner()
                if owner is not None and alive(owner):
                    raise self._in_use(owner) from None
                self.path.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w") as f:
                f.write(f"{os.getpid()}\n")
            return self
        raise RunDirectoryError(f"{self.flag} {self.path.parent}: another run took its lock "
                                f"just now; wait for it, or choose another {self.flag}")

    def __exit__(self, *exc) -> None:
        if self.fd is not None:     # removed while still held: the next run makes a new file
            self.path.unlink(missing_ok=True)
            os.close(self.fd)
            self.fd = None
            return
        try:
            ours = self._owner() == os.getpid()
        except RunDirectoryError:         # replaced while the run wrote: not ours to remove
            ours = False
        if ours:
            self.path.unlink(missing_ok=True)
