"""Where a run's files live, whatever runs it: ``<home>/runs/<uid>/``, output in ``output.log``.

A local run's output is pumped there by its supervisor; the Kubernetes runtime copies a pod's
output there as the kubelet serves it. Either way ``Runtime.logs`` reads the one file, by byte
offset, and a finished run's output outlives the process or pod that wrote it.

A run keeps at most a cap of output (``Settings.retention.max_output_bytes``), written through
:func:`append_output`: its first quarter as it comes, then only the latest bytes are held
(``output.held``), since the end of a failed run's output is what says why it failed.
:func:`finish_output` closes the output once the run ended: the held end follows the start,
after a marker line saying how many bytes were dropped there if any were (an output within the
cap is kept exactly as written), and the whole is compressed into
``output.log.gz`` of independent gzip members of :data:`LOG_CHUNK` bytes each, with an index
of where each member starts (``output.log.gz.index``), so a read by offset inflates at most
two members. The file only ever grows while the run is live, so offsets stay valid; and a
reader that started on ``output.log`` finds the same bytes at the same offsets once it is
compressed.

A retried run's next attempt appends to the same output after the earlier attempt closed it:
:func:`append_output` reopens it first (inflated back into ``output.log``, the same bytes at
the same offsets), so the file still only grows, and the cap counts again from where the
attempt began (``output.base``): each attempt keeps its own start and end, and is followed
live from its start as the first was.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import zlib
from pathlib import Path
from typing import BinaryIO

from runplane.config import Settings
from runplane.runtimes.contract import LOG_CHUNK

log = logging.getLogger(__name__)

OUTPUT = "output.log"
COMPRESSED = OUTPUT + ".gz"
INDEX = COMPRESSED + ".index"
#: The end of the output past the cap's first part, of which the latest bytes are kept.
HELD = "output.held"
#: How many bytes of the held end were dropped so far (a number as text).
DROPPED = "output.dropped"
#: The output's size when an attempt reopened it, where the cap counts from (a number as text).
BASE = "output.base"
#: Which part of the cap the output's start takes: the rest holds its end.
HEAD_SHARE = 4
#: Every marker line runplane writes into a run's output starts with this.
MARKER = b"[runplane] "
_OPEN_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC
#: The most one step of inflating produces: small steps keep a read's memory near its chunk.
_INFLATE_STEP = 1 << 16
#: How far into the kept end a cut looks for the start of a line.
_LINE_SEARCH = 4096


def run_dir(settings: Settings, uid: str) -> Path:
    return settings.local.home / "runs" / uid


def private_dir(path: Path) -> Path:
    """``path`` as a directory only its owner may enter; so is every missing parent it needs
    (a fresh machine has no runplane home yet), since they hold runs' files too."""
    if not path.parent.is_dir():
        private_dir(path.parent)
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def remove_run_dir(runs: Path, uid: str) -> bool:
    """Remove the directory of run ``uid`` under ``runs`` (``<home>/runs``) and all in it;
    whether there was one. The uid is checked to be one (hex only), so the path never leaves
    ``runs``; a link planted in the directory is removed, never followed."""
    if not (uid and all(c in "0123456789abcdef" for c in uid) and len(uid) <= 32):
        raise ValueError(f"not a run uid: {uid!r}")
    path = runs / uid
    if not os.path.lexists(path):
        return False
    if path.is_symlink() or not path.is_dir():
        os.unlink(path)
        return True
    assert shutil.rmtree.avoids_symlink_attacks  # the descriptor-based walk, on Linux
    shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path):  # what could not be removed stays; the next pass tries again
        log.warning("could not remove all of %s", path)
    return True


def _split(cap: int) -> tuple[int, int]:
    """How many bytes of the output's start and of its end a cap keeps."""
    head = cap // HEAD_SHARE
    return head, cap - head


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _open_append(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | _OPEN_FLAGS, 0o600)


def append_output(directory: Path, data: bytes, cap: int) -> None:
    """Append ``data`` to the output of the run whose directory is ``directory``, keeping at
    most ``cap`` bytes of it: up to a quarter of the cap goes to ``output.log`` as it comes;
    the rest is held back (``output.held``), only its latest three quarters of the cap kept,
    until :func:`finish_output` appends them. One writer per run at a time (the local
    supervisor, or the Kubernetes log copier)."""
    if not data:
        return
    head, tail = _split(cap)
    held = directory / HELD
    if not os.path.lexists(held):
        fd = _open_plain(directory)
        try:
            # This attempt's start counts from where it began (an earlier attempt's output
            # closed and reopened: its base).
            size = max(os.fstat(fd).st_size - _number(directory / BASE), 0)
            room = max(head - size, 0)
            _write_all(fd, data[:room])
            data = data[room:]
            if not data:
                return
            os.close(os.open(held, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS, 0o600))
        finally:
            os.close(fd)
    _hold(directory, data, tail)


def _open_plain(directory: Path) -> int:
    """``output.log`` opened to append; an output an earlier attempt closed is reopened first."""
    path = directory / OUTPUT
    try:
        return _opened(path, os.O_WRONLY | os.O_APPEND)
    except FileNotFoundError:
        pass
    if os.path.lexists(directory / COMPRESSED):
        _reopen(directory)
    return _open_append(path)


def _reopen(directory: Path) -> None:
    """Inflate a closed output back into ``output.log`` so that it can grow again. Readers
    find the same bytes at the same offsets throughout: the plain file is renamed into place
    whole, and a read prefers it to the compressed one.

    Only an output runplane closed is inflated (its files runplane's own, with their index),
    and no further than its index says: a run that may write in its directory cannot plant a
    file that inflates without end."""
    path = directory / OUTPUT
    index = _index(directory / INDEX)
    if index is None or not (_owned(directory / COMPRESSED) and _owned(directory / INDEX)):
        for name in (COMPRESSED, INDEX):  # not an output runplane closed: a fresh start
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / name)
        return
    temporary = directory / (OUTPUT + ".new")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)
    target = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS, 0o600)
    try:
        offset = 0
        while offset < index[0] and (chunk := _read_compressed(directory / COMPRESSED, offset)):
            _write_all(target, chunk)
            offset += len(chunk)
    finally:
        os.close(target)
    _replace(directory / BASE, str(offset).encode())
    os.replace(temporary, path)
    for name in (COMPRESSED, INDEX):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(directory / name)


def output_size(directory: Path) -> int:
    """How many bytes were appended to the run's output as the cap counts them: its start,
    what was dropped of its end and the end held; a closed output counts as its size. A
    writer that records it can cut the output back to it (:func:`cut_output`)."""
    size = _size(directory / OUTPUT)
    if size is None:
        compressed = _index(directory / INDEX)
        size = compressed[0] if compressed is not None else 0
    return size + _dropped(directory) + (_size(directory / HELD) or 0)


def cut_output(directory: Path, size: int) -> None:
    """Cut a live output back to the first ``size`` bytes appended to it (as
    :func:`output_size` counted them), so that the bytes appended after are appended again.
    When the held end was already cut back past ``size``, it is emptied and what it dropped is
    counted up to ``size``: the bytes that come again refill it, the end kept is the same."""
    plain = directory / OUTPUT
    try:
        fd = _opened(plain, os.O_WRONLY)
    except FileNotFoundError:
        if output_size(directory) <= size:
            return
        _reopen(directory)
        if not os.path.lexists(plain):  # nothing of runplane's to cut
            return
        fd = _opened(plain, os.O_WRONLY)
    try:
        head = os.fstat(fd).st_size
        if size <= head:
            if size < head:
                os.ftruncate(fd, size)
                if _number(directory / BASE) > size:  # the cap counts from what is left
                    _replace(directory / BASE, str(size).encode())
            for name in (HELD, DROPPED):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(directory / name)
            return
    finally:
        os.close(fd)
    held = directory / HELD
    if not os.path.lexists(held):  # nothing beyond the start to cut
        return
    rest, dropped = size - head, _dropped(directory)
    if rest < dropped:
        _replace(directory / DROPPED, str(rest).encode())
        rest = dropped = 0
    fd = _opened(held, os.O_WRONLY)
    try:
        if os.fstat(fd).st_size > rest - dropped:
            os.ftruncate(fd, rest - dropped)
    finally:
        os.close(fd)


def _size(path: Path) -> int | None:
    try:
        return os.lstat(path).st_size
    except FileNotFoundError:
        return None


def _hold(directory: Path, data: bytes, keep: int) -> None:
    """Append to the held end; past twice ``keep``, cut it back to its last ``keep`` bytes (so
    each byte is copied about once) and count what was dropped."""
    held = directory / HELD
    fd = _open_append(held)
    try:
        _write_all(fd, data)
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if size <= 2 * keep:
        return
    temporary = held.with_name(HELD + ".new")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)
    source = _opened(held, os.O_RDONLY)
    try:
        target = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS, 0o600)
        try:
            _copy(source, size - keep, target)
        finally:
            os.close(target)
    finally:
        os.close(source)
    os.replace(temporary, held)
    _replace(directory / DROPPED, str(_number(directory / DROPPED) + size - keep).encode())


def _copy(source: int, start: int, target: int) -> None:
    """Copy ``source`` from ``start`` to its end onto ``target``, a chunk at a time: a service
    finishing many runs holds a chunk of each, never a whole end."""
    while chunk := os.pread(source, LOG_CHUNK, start):
        _write_all(target, chunk)
        start += len(chunk)


def _opened(path: Path, flags: int) -> int:
    return os.open(path, flags | _OPEN_FLAGS)


def _replace(path: Path, data: bytes) -> None:
    """Write ``path`` anew through a temporary file renamed over it: a reader sees the old
    content or the new, and a link planted at the name is replaced, never followed."""
    temporary = path.with_name(path.name + ".new")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS, 0o600)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)
    os.replace(temporary, path)


def _dropped(directory: Path) -> int:
    return _number(directory / DROPPED)


def _number(path: Path) -> int:
    """The number a small file of runplane's holds; 0 when there is none, or when the file is
    not runplane's (a run that may write in its directory could plant one)."""
    try:
        with open(_opened(path, os.O_RDONLY), "rb") as stream:
            if os.fstat(stream.fileno()).st_uid != os.geteuid():
                return 0
            return max(int(stream.read(32) or b"0"), 0)
    except (OSError, ValueError):  # none, or a link in its place
        return 0


def _owned(path: Path) -> bool:
    """Whether ``path`` is a file of runplane's own user (not a link)."""
    try:
        return os.lstat(path).st_uid == os.geteuid()
    except FileNotFoundError:
        return False


def finish_output(directory: Path, cap: int) -> None:
    """Close the output of a run that ended and compress it (see the module's docstring).
    Its held end follows its start: all of it when the output stayed within ``cap`` (the
    output is then exactly what the run wrote), else its last three quarters of the cap, from
    a line's start, after a marker line saying how many bytes were dropped there. Doing it
    again does nothing."""
    held = directory / HELD
    if os.path.lexists(held):
        _, keep = _split(cap)
        source = _opened(held, os.O_RDONLY)
        try:
            size = os.fstat(source).st_size
            start = max(size - keep, 0)
            if start:  # cut: start at the next line when one starts soon enough
                newline = os.pread(source, _LINE_SEARCH, start).find(b"\n")
                start += newline + 1 if newline >= 0 else 0
            dropped = _dropped(directory) + start
            fd = _open_append(directory / OUTPUT)
            try:
                if dropped:
                    _write_all(
                        fd,
                        b"\n"
                        + MARKER
                        + f"{dropped} bytes of output were dropped here (a run "
                        f"keeps {cap} bytes of output: its start and its end); the last "
                        f"{size - start} bytes follow\n".encode(),
                    )
                _copy(source, start, fd)
            finally:
                os.close(fd)
        finally:
            os.close(source)
        os.unlink(held)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(directory / DROPPED)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(directory / BASE)
    compress_output(directory)


def compress_output(directory: Path) -> None:
    """Replace ``output.log`` with its compressed form (members of :data:`LOG_CHUNK` bytes and
    their index); an empty or missing output stays as it is."""
    path = directory / OUTPUT
    try:
        source = open(_opened(path, os.O_RDONLY), "rb")  # noqa: SIM115 - closed below
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ELOOP):
            return
        raise
    starts: list[int] = []
    temporary = directory / (COMPRESSED + ".new")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)
    with (
        source,
        open(
            os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS, 0o600), "wb"
        ) as target,
    ):
        size = 0
        while chunk := source.read(LOG_CHUNK):
            starts.append(target.tell())
            packer = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: a gzip member
            target.write(packer.compress(chunk) + packer.flush())
            size += len(chunk)
        starts.append(target.tell())
    if size == 0:
        os.unlink(temporary)
        return
    # The index first: a reader that finds the compressed file finds its index.
    _replace(directory / INDEX, json.dumps({"size": size, "starts": starts}).encode())
    os.replace(temporary, directory / COMPRESSED)
    os.unlink(path)


def read_output(path: Path, offset: int) -> tuple[bytes, int]:
    """At most :data:`LOG_CHUNK` bytes of the output at ``path`` (a run's ``output.log``) from
    ``offset``, and the offset after them; once the output is compressed, from the same
    offsets of ``output.log.gz``.

    Nothing at all (the run has not started, or its files were removed) or an offset past the
    end reads as nothing. Files are opened without following a link, since the run that
    writes them could replace one with a link to a file it should not be able to show.
    """
    chunk = _read_plain(path, offset)
    if chunk is None:  # compressed (renamed into place before the plain file goes), or none
        chunk = _read_compressed(path.with_name(path.name + ".gz"), offset) or b""
    return chunk, offset + len(chunk)


def _present(path: Path) -> int | None:
    """``path`` opened for reading, or ``None`` when it is missing or a link."""
    try:
        return _opened(path, os.O_RDONLY)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
            return None
        raise


def _read_plain(path: Path, offset: int) -> bytes | None:
    fd = _present(path)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as stream:
        if offset >= os.fstat(fd).st_size:
            return b""
        stream.seek(offset)
        return stream.read(LOG_CHUNK)


def _read_compressed(path: Path, offset: int) -> bytes | None:
    """The chunk at ``offset`` of a compressed output; ``None`` when there is none. Inflating
    is bounded: a member planted by a run cannot make a read produce more than a chunk."""
    fd = _present(path)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as stream:
        starts = _index(path.with_name(path.name + ".index"))
        if starts is None:  # no index: inflate from the start
            return _inflate(stream, skip=offset)
        size, members = starts
        if offset >= size:
            return b""
        first = offset // LOG_CHUNK
        if first + 1 >= len(members):
            return b""
        stream.seek(members[first])
        return _inflate(stream, skip=offset - first * LOG_CHUNK)


def _index(path: Path) -> tuple[int, list[int]] | None:
    try:
        with open(_opened(path, os.O_RDONLY), "rb") as stream:
            data = json.loads(stream.read(1 << 20))
        size, starts = int(data["size"]), [int(start) for start in data["starts"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return size, starts


def _inflate(stream: BinaryIO, skip: int) -> bytes:
    """``LOG_CHUNK`` bytes after the first ``skip`` of what ``stream`` inflates to (members
    one after the other), holding little more than the chunk: what is skipped is dropped as
    it comes."""
    pieces: list[bytes] = []
    size = 0
    unpacker = zlib.decompressobj(31)
    pending = b""
    while size < LOG_CHUNK:
        if unpacker.eof:  # the next member starts in what the last one left over
            pending, unpacker = unpacker.unused_data, zlib.decompressobj(31)
        data = unpacker.unconsumed_tail or pending or stream.read(1 << 16)
        pending = b""
        if not data:
            break
        try:
            if skip:
                skip -= len(unpacker.decompress(data, min(skip, _INFLATE_STEP)))
                continue
            piece = unpacker.decompress(data, min(LOG_CHUNK - size, _INFLATE_STEP))
        except zlib.error:
            break
        pieces.append(piece)
        size += len(piece)
    return b"".join(pieces)
