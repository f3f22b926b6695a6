"""A stand-in for apt waiting for dpkg: it starts a child that prints a
line, then stays silent for a while, again and again, and waits on the
terminal and the child's pipe together in one poll, as apt polls its
terminal while dpkg runs triggers ("Processing triggers for man-db ...").

Usage: apt.py STEPS PAUSE. Prints what the child prints, then "Done" and
exits 0 once the child's pipe reaches its end. A line typed on the
terminal meanwhile is echoed back as "typed: ...".
"""

import os
import select
import subprocess
import sys

CHILD = """
import sys, time
for step in range(int(sys.argv[1])):
    print(f"Setting up package-{step} ...", flush=True)
    time.sleep(float(sys.argv[2]))
print("Processing triggers for man-db ...", flush=True)
"""

steps, pause = sys.argv[1], sys.argv[2]
child = subprocess.Popen([sys.executable, "-c", CHILD, steps, pause], stdout=subprocess.PIPE)
print("Reading package lists... Done", flush=True)
poller = select.poll()
poller.register(sys.stdin.fileno(), select.POLLIN)
poller.register(child.stdout.fileno(), select.POLLIN)
while True:
    for fd, _ in poller.poll():
        data = os.read(fd, 4096)
        if fd == sys.stdin.fileno():
            print("typed:", data.decode().strip(), flush=True)
        elif data:
            sys.stdout.write(data.decode())
            sys.stdout.flush()
        else:
            child.wait()
            print("Done", flush=True)
            sys.exit(child.returncode)
