"""An interpreter that has imported torch and forks a child for each snippet
that openreg_run.py gives it (Note [A warm interpreter] there). Standard
library only besides torch; run as a script:

    python warm_interpreter.py SOCKET

It prints "ready" once it listens on the Unix socket SOCKET, and exits when
its standard input closes (when the build that started it ends or dies).

Each request is one connection: the client sends the snippet as one line of
JSON and keeps the connection open while it waits. A waiter forked for the
connection forks the child that runs the snippet and waits for the child to
end, for the snippet's time to pass, or for the
client to go (the connection closing): in the last two cases it kills the
child. It then sends the child's exit status as subprocess reports one
(negative: the signal that ended it), or "timed out".
"""

import builtins
import importlib.machinery
import json
import os
import random
import select
import shutil
import signal
import socket
import sys
import types

import torch  # noqa: F401  (the import every snippet would pay; torch loads openreg's backend)


def serve(path: str) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the waiters
    print("ready", flush=True)
    nothing = os.open(os.devnull, os.O_WRONLY)  # from now on nobody reads the build's pipe
    os.dup2(nothing, 1)
    os.dup2(nothing, 2)
    os.close(nothing)
    while True:
        readable, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in readable and not sys.stdin.readline():
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)  # the build's folder for it, if left
            return  # the build closed the pipe, or ended
        if listener in readable:
            connection, _ = listener.accept()
            if os.fork() == 0:
                listener.close()
                wait_for_snippet(connection)  # never returns
            connection.close()


def wait_for_snippet(connection: socket.socket) -> None:
    """In the waiter: forks the snippet's child and reports on it. Never returns:
    the child ends through SystemExit once the snippet ran, as an interpreter
    does, and the waiter with os._exit, running none of torch's atexit handlers."""
    try:
        request = json.loads(connection.makefile("rb").readline())
    except (OSError, ValueError):
        os._exit(0)  # the client went away
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # so this process, and the snippet, can wait for children
    child = os.fork()
    if child == 0:
        connection.close()
        run_snippet(request["code"], request["file"], request["workdir"], request["output"])
    try:
        ended = os.pidfd_open(child)
        ready, _, _ = select.select([ended, connection], [], [], request["timeout"])
        if ended not in ready:  # past its time, or the build gave up on it
            os.kill(child, signal.SIGKILL)
        _, status = os.waitpid(child, 0)
        connection.sendall(f"{os.waitstatus_to_exitcode(status) if ended in ready else 'timed out'}\n".encode())
    except OSError:
        pass  # the client went away
    finally:
        os._exit(0)


def run_snippet(code: str, file: str | None, workdir: str, output: str) -> None:
    """Runs the snippet as `python -` or `python FILE` would after `import torch`,
    then ends this process as such an interpreter ends (SystemExit)."""
    os.chdir(workdir)
    nothing = os.open(os.devnull, os.O_RDONLY)
    written = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(nothing, 0)  # in place of the build's pipe, which the snippet must not hold open
    os.dup2(written, 1)  # sys.stdout and sys.stderr write through to these (PYTHONUNBUFFERED)
    os.dup2(written, 2)
    os.close(nothing)
    os.close(written)
    if "multiprocessing.process" in sys.modules:  # where a spawned child looks for the main script
        sys.modules["multiprocessing.process"].ORIGINAL_DIR = workdir
    filename = os.path.join(workdir, file) if file else "<stdin>"
    sys.argv = [file or "-"]
    sys.orig_argv = [sys.executable, file or "-"]
    sys.path[0] = workdir if file else ""
    sys.modules["__main__"] = main = types.ModuleType("__main__")
    loader = importlib.machinery.SourceFileLoader("__main__", filename) if file else importlib.machinery.BuiltinImporter
    main.__dict__.update(__builtins__=builtins, __file__=filename, __cached__=None, __loader__=loader,
                         __annotations__={})  # as the interpreter makes __main__
    random.seed()  # each fresh interpreter seeds its own
    try:
        exec(compile(code, filename, "exec"), main.__dict__)
    except SystemExit:
        raise
    except BaseException as error:  # reported as the interpreter reports an uncaught exception
        error = error.with_traceback(error.__traceback__.tb_next)  # without this function's frame
        sys.excepthook(type(error), error, error.__traceback__)
        _forget_the_file(main)
        raise SystemExit(1) from None
    _forget_the_file(main)
    raise SystemExit(0)


def _forget_the_file(main: types.ModuleType) -> None:
    """As the interpreter does once the main script has run (but not after SystemExit)."""
    main.__dict__.pop("__file__", None)
    main.__dict__.pop("__cached__", None)


if __name__ == "__main__":
    serve(sys.argv[1])
