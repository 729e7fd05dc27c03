"""Which skills the sandbox's processes opened: the environment's own record of reads and of consultation.

A skill is *read* when a process opens its `SKILL.md` or `README.md` (the file directly inside the
skill's folder, name compared case-insensitively), whatever the command looked like: `cat`, a glob
after `cd /skills`, `grep -r`, a script, a background job. A skill is *consulted* when a process opens
or executes ANY file of its folder: its SKILL.md (a read is a consultation), a script (run or read),
a data file, a reference. Listing (`ls`, `find`) opens folders, not files: neither.

The host watches the per-episode copy of the skills that the sandbox mounts at /skills with Linux
inotify (IN_OPEN on every regular file of every skill folder). inotify is inode-based, so opens through
a bubblewrap bind or a Docker bind mount are seen; the kernel queues the event before open() returns
(execve() opens the file it runs, and an interpreter opens its script again), so the agent can
neither suppress nor forge one, and nothing inside the sandbox is trusted.

    watch = SkillOpenWatch(host_copy_of_skills)    # after the copy, before the agent runs anything
    ...run one tool call...
    opened = watch.drain()   # opened.read: ["oracle-skill"]; opened.consulted: ["oracle-skill", "other"]
    watch.close()

Each drain is a *window* (the episode loop drains around every tool call). Every file is watched
IN_ONESHOT and re-armed at the next drain, so one file queues at most one event per window however
often it is opened: an agent looping over the skills cannot overflow the kernel's event queue. If
the queue overflows anyway (events were lost), every skill of every watch on it is reported read and
consulted in its next window: an unseen open can only make an episode look like it read more, never less.

One inotify instance serves the whole process (the per-user limit on instances is 128 by default);
events are handed to the watch that owns their file.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

__all__ = ["READ_FILE_NAMES", "SkillOpenError", "SkillOpenWatch", "WatchedFile", "WindowOpens", "watched_files"]

READ_FILE_NAMES = ("skill.md", "readme.md")
"""Lowercased names of the files whose opening is a read of their skill (directly inside its folder)."""

_IN_OPEN = 0x00000020
_IN_Q_OVERFLOW = 0x00004000
_IN_IGNORED = 0x00008000
_IN_ONESHOT = 0x80000000
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name: empty for file watches)


class SkillOpenError(OSError):
    """The host cannot watch the skill files (no inotify, or its limits are reached)."""


# Declarations below, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class WatchedFile:
    """One regular file of a skill folder whose opening the host watches."""

    skill: str
    """The skill folder it lies in (/skills/NAME/...)."""
    path: Path
    """The file on the host (the sandbox's own copy of the skills)."""
    read: bool
    """Its opening is a read: a SKILL.md / README.md directly inside the skill folder."""


@dataclass(frozen=True)
class WindowOpens:
    """What one window (between two drains) saw opened, each skill once, in order of first opening."""

    read: tuple[str, ...] = ()
    """Skills whose SKILL.md / README.md was opened: the window's reads."""
    consulted: tuple[str, ...] = ()
    """Skills any file of which was opened or executed (the read ones included): the window's consultations."""


def watched_files(skills_root: Path) -> list[WatchedFile]:
    """Every regular file of every skill folder of `skills_root`, sorted (links are never followed:
    start_sandbox refused them, and a watch through one would watch a host file)."""
    out = []
    for folder in sorted(skills_root.iterdir()):
        if folder.is_symlink() or not folder.is_dir():
            continue
        for current, dirs, files in os.walk(folder):  # does not descend into linked folders
            dirs.sort()
            for name in sorted(files):
                path = Path(current) / name
                if path.is_file() and not path.is_symlink():
                    read = Path(current) == folder and name.lower() in READ_FILE_NAMES
                    out.append(WatchedFile(folder.name, path, read))
    return out


class _Inotify:
    """The process's inotify instance and the owner of every watch descriptor on it."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self._add = libc.inotify_add_watch
        self._add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self._add.restype = ctypes.c_int
        self._rm = libc.inotify_rm_watch
        self._rm.argtypes = [ctypes.c_int, ctypes.c_int]
        self._rm.restype = ctypes.c_int
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise SkillOpenError(err, f"inotify_init1: {os.strerror(err)}")
        self.fd = fd
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.owners: dict[int, tuple[SkillOpenWatch, int]] = {}
        """wd -> (watch, index of its file in watch.files); kept until the kernel says the wd is gone (IN_IGNORED)."""
        self.watches: set[SkillOpenWatch] = set()

    def add(self, path: Path) -> int:
        wd = self._add(self.fd, os.fsencode(path), _IN_OPEN | _IN_ONESHOT)
        if wd < 0:
            err = ctypes.get_errno()
            hint = " (raise fs.inotify.max_user_watches)" if err == errno.ENOSPC else ""
            raise SkillOpenError(err, f"inotify_add_watch {path}: {os.strerror(err)}{hint}")
        return wd

    def remove(self, wd: int) -> None:
        self._rm(self.fd, wd)  # EINVAL when a one-shot watch already fired: nothing to remove

    def pump(self) -> None:
        """Read every queued event and hand it to its watch (caller holds the lock)."""
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return
            at = 0
            while at + _EVENT.size <= len(data):
                wd, mask, _, size = _EVENT.unpack_from(data, at)
                at += _EVENT.size + size
                if mask & _IN_Q_OVERFLOW:
                    for watch in self.watches:
                        watch._lost = True
                    continue
                owner = self.owners.get(wd)
                if mask & _IN_IGNORED:
                    self.owners.pop(wd, None)
                elif owner is not None and mask & _IN_OPEN:
                    owner[0]._pending.append(owner[1])


_SHARED: _Inotify | None = None
_SHARED_LOCK = threading.Lock()


def _shared() -> _Inotify:
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None or _SHARED.pid != os.getpid():  # a forked child gets its own instance
            _SHARED = _Inotify()
        return _SHARED


class SkillOpenWatch:
    """The opens of one sandbox's skill files, drained window by window (module docstring)."""

    def __init__(self, skills_root: Path) -> None:
        self.root = skills_root
        self.files = watched_files(skills_root)
        self._inotify = _shared()
        self._pending: list[int] = []
        self._lost = False
        self._closed = False
        self._wds: list[int] = []
        with self._inotify.lock:
            self._inotify.watches.add(self)
            try:
                self._arm()
            except SkillOpenError:
                self._close_locked()
                raise

    def _arm(self) -> None:
        """(Re-)arm every file: a watch that has not fired keeps its wd, a fired one gets a new wd. Every
        file, not only those seen firing: one that fired while the queue was being read would otherwise
        stay unarmed through the next window (one cheap syscall a file: an episode's skills hold tens)."""
        self._wds = []
        for index, watched in enumerate(self.files):
            wd = self._inotify.add(watched.path)
            self._inotify.owners[wd] = (self, index)
            self._wds.append(wd)

    def drain(self) -> WindowOpens:
        """Skills read and consulted since the previous drain, each once, in order of first opening."""
        with self._inotify.lock:
            if self._closed:
                return WindowOpens()
            self._arm()  # before reading: an open from now on is queued, never missed
            self._inotify.pump()
            opened, self._pending = self._pending, []
            if self._lost:
                self._lost = False
                opened += list(range(len(self.files)))
        files = [self.files[i] for i in opened]
        return WindowOpens(read=tuple(dict.fromkeys(f.skill for f in files if f.read)),
                           consulted=tuple(dict.fromkeys(f.skill for f in files)))

    def close(self) -> None:
        """Stop watching (safe to call twice)."""
        with self._inotify.lock:
            self._close_locked()

    def _close_locked(self) -> None:
        if self._closed:
            return
        self._closed = True
        for wd in self._wds:
            self._inotify.remove(wd)
        self._inotify.watches.discard(self)
        for wd in [wd for wd, (owner, _) in self._inotify.owners.items() if owner is self]:
            del self._inotify.owners[wd]
        self._pending = []
