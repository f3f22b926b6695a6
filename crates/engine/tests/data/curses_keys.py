# A curses program (keypad on: application cursor-key mode) that writes the
# name of every key code it gets to the file named by its argument, one per
# line, until `q`. The key tests of both crates run it.
import curses, sys
log = open(sys.argv[1], "w", buffering=1)
def main(window):
    window.keypad(True)
    window.addstr(0, 0, "ready for keys")
    window.refresh()
    while True:
        code = window.getch()
        name = curses.keyname(code).decode()
        log.write(name + "\n")
        window.addstr(1, 0, name + "      ")
        window.refresh()
        if name == "q":
            break
curses.wrapper(main)
