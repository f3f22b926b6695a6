#!/usr/bin/env python3
"""record.py OUT COLS ROWS CMD: runs CMD (bash -c) in a new PTY of COLS x ROWS
and writes every byte it prints to OUT."""
import fcntl, os, pty, struct, sys, termios

out, cols, rows, cmd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
pid, fd = pty.fork()
if pid == 0:
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    os.environ["TERM"] = "xterm-256color"
    os.environ["COLUMNS"] = str(cols)
    os.environ["LINES"] = str(rows)
    os.execvp("bash", ["bash", "--norc", "--noprofile", "-c", cmd])
data = bytearray()
while True:
    try:
        chunk = os.read(fd, 65536)
    except OSError:
        break
    if not chunk:
        break
    data += chunk
os.waitpid(pid, 0)
open(out, "wb").write(bytes(data))
print(f"{out}: {len(data)} bytes", file=sys.stderr)
