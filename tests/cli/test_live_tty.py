#!/usr/bin/env python3
"""Integration: plateau run's live status line on a terminal it shares with the program (docs/live.md). plateau run
runs on a pseudo-terminal (stdin, stdout and stderr, its controlling terminal, 24 x 80); its bytes go through a small
VT emulator (below: the cursor, line feeds, DECSTBM scroll regions, DECSC/DECRC, erases), and what a person would
read is checked: every line the program prints is whole on its own row, no status text inside it, and on every way
plateau run ends (the program exits, the program dies by a signal, SIGTERM to plateau run) the terminal gets its full
height back and the status row is clear. A resize (SIGWINCH) moves the reserved row to the new last row. With stderr
not a terminal nothing of this is written. The program waits, line by line, until the test has seen the status line
drawn again (hand-off files: no timing).
Usage: test_live_tty.py PLATEAU
"""
import fcntl
import os
import pty
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time

plateau = os.path.abspath(sys.argv[1])
ROWS, COLS = 24, 80


class Screen(object):
    """Just enough of a VT100 for these bytes: what scrolls off the top is kept in `history`."""

    def __init__(self, rows, cols):
        self.rows, self.cols = rows, cols
        self.grid = [[" "] * cols for _ in range(rows)]
        self.y = self.x = 0
        self.top, self.bot = 0, rows - 1
        self.saved = (0, 0)
        self.history = []

    def resize(self, rows, cols):
        grid = [[" "] * cols for _ in range(rows)]
        for y in range(min(rows, self.rows)):
            for x in range(min(cols, self.cols)):
                grid[y][x] = self.grid[y][x]
        self.grid, self.rows, self.cols = grid, rows, cols
        self.top, self.bot = 0, rows - 1
        self.y, self.x = min(self.y, rows - 1), min(self.x, cols - 1)

    def linefeed(self):
        if self.y == self.bot:
            line = self.grid.pop(self.top)
            if self.top == 0:
                self.history.append("".join(line).rstrip())
            self.grid.insert(self.bot, [" "] * self.cols)
        elif self.y < self.rows - 1:
            self.y += 1

    def csi(self, params, final):
        private = params.startswith("?")
        nums = [int(p) if p.isdigit() else 0 for p in params.lstrip("?").split(";")] if params.lstrip("?") else []
        n = nums[0] if nums and nums[0] else 1
        if private or final == "m":
            return
        if final == "r":
            top = nums[0] if len(nums) > 0 and nums[0] else 1
            bot = nums[1] if len(nums) > 1 and nums[1] else self.rows
            self.top, self.bot = top - 1, min(bot, self.rows) - 1
            self.y = self.x = 0
        elif final in "Hf":
            self.y = min(max((nums[0] if nums and nums[0] else 1) - 1, 0), self.rows - 1)
            self.x = min(max((nums[1] if len(nums) > 1 and nums[1] else 1) - 1, 0), self.cols - 1)
        elif final == "A":
            floor = self.top if self.y >= self.top else 0
            self.y = max(self.y - n, floor)
        elif final == "B":
            self.y = min(self.y + n, self.bot if self.y <= self.bot else self.rows - 1)
        elif final == "C":
            self.x = min(self.x + n, self.cols - 1)
        elif final == "D":
            self.x = max(self.x - n, 0)
        elif final == "K":
            mode = nums[0] if nums else 0
            row = self.grid[self.y]
            rng = range(self.x, self.cols) if mode == 0 else range(0, self.x + 1) if mode == 1 else range(self.cols)
            for i in rng:
                row[i] = " "
        elif final == "J":
            for y in range(self.y + 1, self.rows):
                self.grid[y] = [" "] * self.cols

    def feed(self, text):
        i = 0
        while i < len(text):
            c = text[i]
            if c == "\x1b" and i + 1 < len(text):
                nxt = text[i + 1]
                if nxt == "7":
                    self.saved = (self.y, self.x)
                    i += 2
                    continue
                if nxt == "8":
                    self.y, self.x = self.saved
                    i += 2
                    continue
                if nxt == "[":
                    j = i + 2
                    while j < len(text) and not ("@" <= text[j] <= "~"):
                        j += 1
                    if j < len(text):
                        self.csi(text[i + 2:j], text[j])
                    i = j + 1
                    continue
                i += 2
                continue
            if c == "\r":
                self.x = 0
            elif c == "\n":
                self.linefeed()
            elif c == "\b":
                self.x = max(self.x - 1, 0)
            elif c >= " ":
                if self.x >= self.cols:
                    self.x = 0
                    self.linefeed()
                self.grid[self.y][self.x] = c
                self.x += 1
            i += 1

    def rows_text(self):
        return ["".join(r).rstrip() for r in self.grid]


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Run(object):
    """plateau run on a pty; read() collects its bytes, split where the terminal was resized"""

    def __init__(self, tmp, name, program):
        self.tmp, self.chunks, self.stream = tmp, [[]], b""
        self.master, slave = pty.openpty()
        set_size(slave, ROWS, COLS)

        def own_terminal():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(
            [plateau, "run", "--no-report", "--live", "--live-interval", "0.1", "-o", os.path.join(tmp, name),
             "--", "/bin/sh", "-c", program], stdin=slave, stdout=slave, stderr=slave, cwd=tmp,
            preexec_fn=own_terminal, close_fds=True)
        os.close(slave)
        self.sizes = [(ROWS, COLS)]

    def read(self, until=None, timeout=60.0):
        """Read until `until` (bytes) appears after what was read before, or the end; hang guard only"""
        start = len(self.stream)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if until is not None and until in self.stream[start:]:
                return True
            r, _, _ = select.select([self.master], [], [], 0.2)
            if not r:
                continue
            try:
                data = os.read(self.master, 65536)
            except OSError:
                data = b""
            if not data:
                return until is None
            self.stream += data
            self.chunks[-1].append(data)
        return False

    def resize(self, rows, cols):
        set_size(self.master, rows, cols)
        self.sizes.append((rows, cols))
        self.chunks.append([])

    def finish(self):
        self.read(None)
        self.proc.wait(timeout=60)
        os.close(self.master)
        screen = Screen(*self.sizes[0])
        for k, chunk in enumerate(self.chunks):
            if k:
                screen.resize(*self.sizes[k])
            screen.feed(b"".join(chunk).decode("utf-8", "replace"))
        return screen


failures = []


def check(name, cond, what, screen=None):
    if not cond:
        extra = ""
        if screen is not None:
            extra = "\n  history: %r\n  screen: %r\n  region %d..%d" % (screen.history[-30:], screen.rows_text(),
                                                                          screen.top, screen.bot)
        failures.append("%s: %s%s" % (name, what, extra))


def last_status(stream):
    """The text of the last status line drawn (after the last '\\x1b[2K' that precedes 'plateau: ')"""
    text = stream.decode("utf-8", "replace")
    k = text.rfind("\x1b[2Kplateau: ")
    if k < 0:
        return None
    end = text.find("\x1b8", k)
    return text[k + 4:end if end >= 0 else None]


# The program: N lines, each printed once the test has seen the status line drawn after the previous one.
LINES = 6
PROGRAM = ("i=1; while [ $i -le %d ]; do while [ ! -e go$i ]; do sleep 0.02; done; echo \"program line $i\"; "
           "i=$((i+1)); done; %s") % (LINES, "{tail}")


def lines_scenario(tmp, name, tail, after):
    work = os.path.join(tmp, name)
    os.makedirs(work)
    run = Run(work, "run", PROGRAM.format(tail=tail))
    ok = run.read(b"plateau: ")
    check(name, ok, "the status line was never drawn: %r" % run.stream[-400:])
    for i in range(1, LINES + 1):
        open(os.path.join(work, "go%d" % i), "w").close()
        ok = run.read(b"program line %d" % i) and run.read(b"plateau: ")
        check(name, ok, "line %d, then the status line again, never came" % i)
    after(run, work)
    screen = run.finish()
    rows = screen.history + screen.rows_text()
    for i in range(1, LINES + 1):
        want = "program line %d" % i
        check(name, rows.count(want) == 1, "%r is not whole on a row of its own" % want, screen)
    mixed = [r for r in rows if "program line" in r and "plateau" in r]
    check(name, not mixed, "status text inside the program's lines: %r" % mixed, screen)
    check(name, (screen.top, screen.bot) == (0, screen.rows - 1),
          "the scroll region was not reset: rows %d..%d" % (screen.top + 1, screen.bot + 1), screen)
    status = last_status(run.stream)
    check(name, status and not [r for r in screen.rows_text() if status.strip() in r],
          "the status line %r is still on the screen" % status, screen)
    return run, screen


with tempfile.TemporaryDirectory(prefix="pl-live-tty-") as tmp:
    # the program ends by itself, after a resize: the reserved row follows the terminal's new last row
    def resize(run, work):
        run.resize(30, 100)
        check("resize", run.read(b"\x1b[1;29r"), "no scroll region for the new size (29 rows)")
        open(os.path.join(work, "go_end"), "w").close()

    run, screen = lines_scenario(tmp, "resize", "while [ ! -e go_end ]; do sleep 0.02; done; echo after resize",
                                 resize)
    check("resize", screen.rows == 30 and "after resize" in screen.history + screen.rows_text(),
          "the line after the resize is missing", screen)
    check("resize", run.proc.returncode == 0, "plateau run exited %r" % run.proc.returncode)

    # the program dies by a signal
    run, screen = lines_scenario(tmp, "program_signal", "kill -TERM $$", lambda run, work: None)
    check("program_signal", run.proc.returncode == -signal.SIGTERM,
          "plateau run ended with %r, not by SIGTERM like the program" % run.proc.returncode)

    # SIGTERM to plateau run: passed on to the program, which ends; plateau run then restores the terminal
    def term(run, work):
        run.proc.send_signal(signal.SIGTERM)

    run, screen = lines_scenario(tmp, "term_plateau", "exec sleep 30", term)
    check("term_plateau", run.proc.returncode == -signal.SIGTERM,
          "plateau run ended with %r after SIGTERM" % run.proc.returncode)

    # stderr not a terminal: no scroll region, no cursor saves, nothing but lines
    work = os.path.join(tmp, "pipe")
    os.makedirs(work)
    r = subprocess.run([plateau, "run", "--no-report", "--live", "--live-interval", "0.1", "-o",
                        os.path.join(work, "run"), "--", "/bin/sh", "-c", "echo one; sleep 0.5; echo two"],
                       cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    check("pipe", r.stdout == b"one\ntwo\n" and b"\x1b" not in r.stderr,
          "stdout %r, stderr %r" % (r.stdout, r.stderr))

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("ok: live line on a shared terminal: lines whole, region restored on exit, signal and SIGTERM; resize; "
      "no escape sequences off a terminal")
