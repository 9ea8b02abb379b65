"""A stand-in for NVIDIA's `nvidia-cuda-mps-control` on machines without the driver, for the tests of bpslaunch's
--mps (bps_tf/launcher/mps.py): `install(folder)` writes an executable of that name into `folder` (put it first
on PATH). Like the real one, `-f` runs the control daemon in the foreground, listening on a Unix socket of
sequenced packets named `control` in $CUDA_MPS_PIPE_DIRECTORY, and without arguments the program sends the
commands of its standard input to that daemon; `quit` ends it. It appends what it does to $FAKE_MPS_RECORD ("started PID PIPE",
"quit PID"). $FAKE_MPS_MODE makes it misbehave: "exit" (fails at once, saying why), "mute" (never listens),
"stubborn" (listens, then ignores quit and SIGTERM)."""

import os
import stat
import sys
import textwrap

NAME = "nvidia-cuda-mps-control"

_PROGRAM = textwrap.dedent('''\
    import os, signal, socket, sys, time

    def record(line):
        with open(os.environ["FAKE_MPS_RECORD"], "a") as out:
            out.write(line + "\\n")

    pipe = os.environ["CUDA_MPS_PIPE_DIRECTORY"]
    path = os.path.join(pipe, "control")
    mode = os.environ.get("FAKE_MPS_MODE", "")
    if sys.argv[1:] == ["-f"]:
        record(f"started {os.getpid()} {pipe}")
        if mode == "exit":
            print("fake mps: cannot open the GPU", flush=True)
            sys.exit(1)
        if mode == "mute":
            time.sleep(3600)
        if mode == "stubborn":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        server.bind(path)
        server.listen(4)
        while True:
            connection, _ = server.accept()
            command = connection.recv(100).decode().strip()
            connection.close()
            if command == "quit" and mode != "stubborn":
                record(f"quit {os.getpid()}")
                os.unlink(path)
                sys.exit(0)
    else:
        client = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        client.connect(path)
        client.sendall(sys.stdin.read().encode())
        client.close()
''')


def install(folder):
    """Writes the stand-in into `folder`; returns its path."""
    path = os.path.join(folder, NAME)
    with open(path, "w") as out:
        out.write(f"#!{sys.executable}\n" + _PROGRAM)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path
