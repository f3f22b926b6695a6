"""The small programs of the scripted day, written into its project directory.

* ``crash.py``: a ZeroDivisionError two frames deep, then a pdb post-mortem
  (``up`` goes to ``outer()``, ``down`` back to ``inner()``, ``q`` ends it);
* ``test_math.py``: a unittest with one failing test (exit code 1);
* ``menu.py``: a curses menu with the keypad on (arrow keys as curses reads
  them, in the program's cursor-key mode); ENTER prints the choice and exits;
* ``remote.py PORT``: a stand-in for ``ssh``: connected to a TCP peer, it
  waits on the terminal and the socket at once, sends each typed line to the
  peer and prints what comes back; end of input ends it.
"""

from __future__ import annotations

import pathlib
import textwrap

PROGRAMS = {
    "crash.py": """\
        import pdb
        import sys
        import traceback


        def inner(n):
            return 10 // n


        def outer():
            return inner(0)


        try:
            outer()
        except ZeroDivisionError:
            traceback.print_exc()
            pdb.post_mortem(sys.exc_info()[2])
        print("post-mortem over")
        """,
    "test_math.py": """\
        import unittest


        class MathTest(unittest.TestCase):
            def test_add(self):
                self.assertEqual(1 + 1, 3)


        if __name__ == "__main__":
            unittest.main()
        """,
    "menu.py": """\
        import curses

        ITEMS = ["apple", "banana", "cherry", "damson"]


        def choose(screen):
            curses.curs_set(0)
            screen.keypad(True)
            chosen = 0
            while True:
                screen.erase()
                screen.addstr(0, 0, "Pick a fruit (arrows, Enter):")
                for row, item in enumerate(ITEMS):
                    mark = ">" if row == chosen else " "
                    screen.addstr(row + 2, 0, f"{mark} {item}")
                screen.refresh()
                key = screen.getch()
                if key == curses.KEY_DOWN:
                    chosen = min(chosen + 1, len(ITEMS) - 1)
                elif key == curses.KEY_UP:
                    chosen = max(chosen - 1, 0)
                elif key in (curses.KEY_ENTER, 10, 13):
                    return ITEMS[chosen]
                else:
                    return f"unexpected key {key}"


        print("chose:", curses.wrapper(choose))
        """,
    "remote.py": """\
        import os
        import select
        import socket
        import sys

        peer = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
        print("connected to the remote end")
        sys.stdout.write("remote$ ")
        sys.stdout.flush()
        while True:
            ready, _, _ = select.select([sys.stdin, peer], [], [])
            if sys.stdin in ready:
                line = os.read(sys.stdin.fileno(), 4096)
                if not line:
                    print("logout")
                    break
                peer.sendall(line)
            if peer in ready:
                data = peer.recv(4096)
                if not data:
                    print("connection closed")
                    break
                sys.stdout.write(data.decode())
                sys.stdout.write("remote$ ")
                sys.stdout.flush()
        """,
}


def write_programs(directory: pathlib.Path) -> None:
    """Writes every program into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, source in PROGRAMS.items():
        (directory / name).write_text(textwrap.dedent(source))
