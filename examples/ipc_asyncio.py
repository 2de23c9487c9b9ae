#!/usr/bin/env python3
"""Awaiting, from asyncio, an ordo signal that another process advances.

This program loads libordo with ctypes (the standard library only),
creates a shared signal, and starts a second Python process (this file
with --child) that opens the signal from an inherited descriptor, works
for a while and advances the signal to 1. The first process awaits that
value without blocking its event loop: an ordo_signal_fd_t exports
"the signal reaches 1" as a descriptor, and loop.add_reader calls back
once it is readable, while another task of the same loop keeps ticking.

usage: ipc_asyncio.py LIBORDO   (the path of libordo.so; or set ORDO_LIBRARY)
"""
import asyncio
import ctypes
import os
import sys
import time

ORDO_OK = 0


class SharedSignalConfig(ctypes.Structure):
    """ordo_shared_signal_config_t (ordo/shared_signal.h)."""
    _fields_ = [("initial_value", ctypes.c_uint64),
                ("name", ctypes.c_char_p),  # None: anonymous memory, passed as a descriptor
                ("flags", ctypes.c_uint32)]


def load_ordo(path):
    """Opens libordo and declares the few functions used here."""
    lib = ctypes.CDLL(path)
    handle = ctypes.c_void_p  # ordo_signal_t *, ordo_signal_fd_t *: opaque
    status = ctypes.c_int     # ordo_status_t
    signatures = {
        "ordo_shared_signal_create": [ctypes.POINTER(SharedSignalConfig), ctypes.POINTER(handle)],
        "ordo_shared_signal_fd": [handle, ctypes.POINTER(ctypes.c_int)],
        "ordo_shared_signal_open_fd": [ctypes.c_int, ctypes.POINTER(handle)],
        "ordo_shared_signal_register": [handle],
        "ordo_signal_advance": [handle, ctypes.c_uint64],
        "ordo_signal_release": [handle],
        "ordo_signal_fd_create": [handle, ctypes.c_uint64, ctypes.POINTER(handle)],
        "ordo_signal_fd_get": [handle, ctypes.POINTER(ctypes.c_int)],
        "ordo_signal_fd_result": [handle],
        "ordo_signal_fd_destroy": [handle],
    }
    for name, argtypes in signatures.items():
        function = getattr(lib, name)
        function.argtypes = argtypes
        function.restype = status
    lib.ordo_status_name.argtypes = [status]
    lib.ordo_status_name.restype = ctypes.c_char_p
    lib.ordo_error_message.argtypes = []
    lib.ordo_error_message.restype = ctypes.c_char_p
    return lib


def name_of(lib, status):
    return lib.ordo_status_name(status).decode()


def check(lib, status, what):
    """Raises with ordo's message unless status is ORDO_OK."""
    if status != ORDO_OK:
        raise RuntimeError(f"{what}: {name_of(lib, status)}: {lib.ordo_error_message().decode()}")


def child(lib, fd):
    """The other process: opens the signal behind fd, works, advances it to 1."""
    signal = ctypes.c_void_p()
    check(lib, lib.ordo_shared_signal_open_fd(fd, ctypes.byref(signal)), "child: open")
    os.close(fd)  # the handle does not need the descriptor
    # If this process died from here on (even by kill -9), the signal would
    # fail with ORDO_ERR_ABANDONED and the parent's descriptor would say so.
    check(lib, lib.ordo_shared_signal_register(signal), "child: register")
    time.sleep(0.05)  # "some work"
    check(lib, lib.ordo_signal_advance(signal, 1), "child: advance")
    check(lib, lib.ordo_signal_release(signal), "child: close the handle")  # unregisters
    return 0


async def parent(lib, library_path):
    # A shared signal at 0, and a descriptor of its page for the child.
    config = SharedSignalConfig(0, None, 0)
    signal = ctypes.c_void_p()
    check(lib, lib.ordo_shared_signal_create(ctypes.byref(config), ctypes.byref(signal)),
          "create a shared signal")
    page_fd = ctypes.c_int()
    check(lib, lib.ordo_shared_signal_fd(signal, ctypes.byref(page_fd)), "get its descriptor")

    # pass_fds lets the descriptor through to the child (it is close-on-exec).
    process = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--child", str(page_fd.value), library_path,
        pass_fds=(page_fd.value,))
    os.close(page_fd.value)

    # "signal reaches 1" as a descriptor the event loop can watch.
    signal_fd = ctypes.c_void_p()
    check(lib, lib.ordo_signal_fd_create(signal, 1, ctypes.byref(signal_fd)), "export the value")
    poll_fd = ctypes.c_int()
    check(lib, lib.ordo_signal_fd_get(signal_fd, ctypes.byref(poll_fd)), "get the descriptor")

    loop = asyncio.get_running_loop()
    reached = loop.create_future()
    loop.add_reader(poll_fd.value, lambda: reached.done() or reached.set_result(None))

    ticks = 0

    async def ticker():  # the loop stays free for other work meanwhile
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    try:
        await asyncio.wait_for(reached, timeout=10)
    finally:
        loop.remove_reader(poll_fd.value)
        ticking.cancel()

    # Readable: the value was reached (ORDO_OK) or the signal failed.
    result = lib.ordo_signal_fd_result(signal_fd)
    print(f"the child's signal: {name_of(lib, result)}, after {ticks} ticks of another task")
    returncode = await asyncio.wait_for(process.wait(), timeout=10)
    print(f"the child exited with {returncode}")

    check(lib, lib.ordo_signal_fd_destroy(signal_fd), "destroy the descriptor")
    check(lib, lib.ordo_signal_release(signal), "close the signal")
    return 0 if result == ORDO_OK and returncode == 0 else 1


def load_or_exit(path):
    """load_ordo, or one line saying why not and exit status 2."""
    try:
        return load_ordo(path)
    except (OSError, AttributeError) as error:
        print(f"ipc_asyncio: cannot use {path} as libordo: {error}", file=sys.stderr)
        sys.exit(2)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        if not sys.argv[2].isdigit():
            print(f"ipc_asyncio: --child takes a descriptor number, not {sys.argv[2]!r}",
                  file=sys.stderr)
            return 2
        return child(load_or_exit(sys.argv[3]), int(sys.argv[2]))
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and sys.argv[1].startswith("-")):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    library_path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("ORDO_LIBRARY")
    if not library_path:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    library_path = os.path.abspath(library_path)
    return asyncio.run(parent(load_or_exit(library_path), library_path))


if __name__ == "__main__":
    sys.exit(main())
