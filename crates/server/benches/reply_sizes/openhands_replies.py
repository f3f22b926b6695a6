"""OpenHands' replies to the reply-size benchmark's script of calls.

Run by hand (not in CI), with the OpenHands terminal installed in a
virtual environment of Python 3.12 or later:

    python3.12 -m venv /tmp/oh
    /tmp/oh/bin/pip install openhands-tools openhands-sdk
    /tmp/oh/bin/python crates/server/benches/reply_sizes/openhands_replies.py [subprocess|tmux]

It drives OpenHands' real tool entry point, `TerminalExecutor`, and counts
the characters of exactly what the model reads (`to_llm_content`, its text
blocks joined with a newline), call by call, in the same order as
`cargo bench -p shellkeep --bench reply_sizes`. It prints a Markdown table.
The default backend is `subprocess` (one session, so that a program
waiting for input can be answered; OpenHands' tmux pane pool breaks
interactive programs, see the notes on its terminal). OpenHands does not
notice a program waiting for input: such a call returns when its `timeout`
runs out, so the script gives those calls the same `timeout` as ours.
OpenHands has no `output` tool and no background sessions: `sleep 60 &`
stands in for a background start.
"""

import sys
import tempfile
import time

from openhands.tools.terminal.definition import TerminalAction
from openhands.tools.terminal.impl import TerminalExecutor

# (reply kind, arguments): the same calls as the Rust benchmark's script.
SCRIPT = [
    ("completed", {"command": "echo hi"}),
    ("running", {"command": "sleep 30", "timeout": 1}),
    ("running, polled", {"command": "", "is_input": True, "timeout": 1}),
    ("killed (C-c)", {"command": "C-c", "is_input": True, "timeout": 10}),
    ("waiting for input", {"command": "read -p 'Your name: ' name; echo \"hi $name\"", "timeout": 2}),
    ("refused", {"command": "ls"}),
    ("answer", {"command": "Bob", "is_input": True, "timeout": 10}),
    ("cut (100,000 lines)", {"command": "seq 1 100000", "timeout": 60}),
    ("background start", {"command": "sleep 60 &"}),
]


def text_of(observation) -> str:
    """What the model reads: the text blocks, joined as our benchmark joins ours."""
    return "\n".join(block.text for block in observation.to_llm_content)


def main() -> None:
    backend = sys.argv[1] if len(sys.argv) > 1 else "subprocess"
    # A directory named like the Rust benchmark's, so the working-directory
    # lines are about as long.
    workdir = tempfile.mkdtemp(prefix="shellkeep-bench-")
    executor = TerminalExecutor(working_dir=workdir, terminal_type=backend)
    print(f"OpenHands terminal ({backend} backend), working directory {workdir}")
    print()
    print("| reply | characters of text | first line |")
    print("| --- | --- | --- |")
    try:
        for kind, arguments in SCRIPT:
            observation = executor(TerminalAction(**arguments))
            text = text_of(observation)
            first = text.splitlines()[0] if text else ""
            print(f"| {kind} | {len(text)} | `{first[:60]}` |")
            if "--verbose" in sys.argv:
                print(text, file=sys.stderr)
            time.sleep(0.2)
    finally:
        executor.close()


if __name__ == "__main__":
    main()
