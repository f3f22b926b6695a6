"""Waits on the terminal and on one more thing, in one select, and prints
what it reads from the terminal. The other thing (argv[1]):

- "socket": a socket pair whose peer a live child holds (it sleeps);
- "busy-pipe": a pipe whose write end a live child holds and never writes
  to, as a command that fakes being busy would;
- "eof-pipe": a pipe whose writer has exited (end of file pending). On end
  of file the pipe leaves the set, as programs do;
- "eof-pipe-edge": the same pipe kept in an edge-triggered epoll set after
  its end of file was seen once: blocked on the terminal and a pipe nobody
  can write to any more;
- "pty": a PTY master whose slave a live child holds (apt runs dpkg on a
  terminal of its own);
- "self-pipe": a socket pair this process holds both ends of (an event
  loop's wake-up channel, as asyncio's).

Prints "ready" and a "> " prompt once it waits, then "got LINE" for the
line read, and exits.
"""

import os
import select
import socket
import sys
import time

kind = sys.argv[1]
watched = None
if kind == "socket":
    mine, theirs = socket.socketpair()
    if os.fork() == 0:
        mine.close()
        time.sleep(600)
        os._exit(0)
    theirs.close()
    watched = mine.fileno()
elif kind == "busy-pipe":
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        os.close(read_end)
        time.sleep(600)
        os._exit(0)
    os.close(write_end)
    watched = read_end
elif kind.startswith("eof-pipe"):
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        os.close(read_end)
        os._exit(0)
    os.close(write_end)
    os.wait()
    watched = read_end
elif kind == "pty":
    master, slave = os.openpty()
    if os.fork() == 0:
        os.setsid()
        os.close(master)
        time.sleep(600)
        os._exit(0)
    os.close(slave)
    watched = master
elif kind == "self-pipe":
    mine, theirs = socket.socketpair()
    watched = mine.fileno()

if kind == "eof-pipe-edge":
    epoll = select.epoll()
    epoll.register(sys.stdin.fileno(), select.EPOLLIN)
    epoll.register(watched, select.EPOLLIN | select.EPOLLET)
    # The end of file is reported once; the pipe stays in the set.
    assert any(fd == watched for fd, _ in epoll.poll(5)), "end of file first"
    print("ready\n> ", end="", flush=True)
    while True:
        if any(fd == sys.stdin.fileno() for fd, _ in epoll.poll()):
            break
else:
    fds = [sys.stdin.fileno(), watched]
    print("ready\n> ", end="", flush=True)
    while True:
        readable, _, _ = select.select(fds, [], [])
        if sys.stdin.fileno() in readable:
            break
        for fd in readable:
            if not os.read(fd, 4096):
                fds.remove(fd)
print("got", sys.stdin.readline().strip(), flush=True)
