"""Writes a conformance vector's bytes into a pipe, one read at a time.

    vectors_feed.py VECTOR [--go]    # to stdout; --go: wait for one line on stdin first

A read of the vector becomes one write, and the next write waits until the
reader has emptied the pipe (FIONREAD = 0), so the reader's reads are the
vector's reads (a read larger than the pipe may be split). Reads of 0 bytes
are skipped: a pipe read never returns nothing before end of stream. The
end of the vector is the end of the stream (the write end is closed).

It stands in for an MCP server behind an SDK's stdio client: it ignores
what it is sent (apart from the --go line) and writes to the end even if
its stdin is closed; it exits quietly if the reader closes its end.
Standard library only (Linux: FIONREAD on a pipe).
"""

import array
import fcntl
import json
import os
import sys
import termios
import threading
import time


def load(path):
    """The vector's bytes and its reads."""
    with open(path, encoding="utf-8") as f:
        vector = json.load(f)
    return bytes.fromhex(vector["input_hex"]), vector["chunks"]


def wait_drained(fd, abort=None):
    """Returns once the pipe behind fd is empty (or abort is set)."""
    pending = array.array("i", [0])
    while True:
        fcntl.ioctl(fd, termios.FIONREAD, pending, True)
        if pending[0] == 0 or (abort is not None and abort.is_set()):
            return
        time.sleep(0.0001)


def feed(fd, data, chunks, abort=None):
    """Writes data to fd read by read; returns the bytes written."""
    pos = 0
    for size in chunks:
        if abort is not None and abort.is_set():
            break
        if size == 0:
            continue
        view = memoryview(data)[pos : pos + size]
        while view:
            view = view[os.write(fd, view) :]
        pos += size
        wait_drained(fd, abort)
    return pos


def feed_in_thread(data, chunks):
    """A pipe whose read end is returned, fed from a thread; the write end
    is closed after the last read. Returns (read_fd, thread, abort)."""
    read_fd, write_fd = os.pipe()
    abort = threading.Event()

    def run():
        try:
            feed(write_fd, data, chunks, abort)
        except BrokenPipeError:
            pass
        finally:
            os.close(write_fd)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return read_fd, thread, abort


def main():
    data, chunks = load(sys.argv[1])
    if "--go" in sys.argv[2:]:
        sys.stdin.buffer.readline()
    try:
        feed(1, data, chunks)
        os.close(1)
    except BrokenPipeError:
        pass


if __name__ == "__main__":
    main()
