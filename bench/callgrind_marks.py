"""Callgrind counting switched on and dumped exactly around the code measured.

`callgrind_control` acts only when valgrind next looks for commands, so the
process has to spin until it has, and the spin is counted with the phase: a
few thousand loop turns while a Perl script starts, more on a loaded machine,
up to a percent of a phase of a hundred requests. Valgrind's client requests
act at the instruction that makes them, so the counts repeat run to run. They
are C macros (`<valgrind/callgrind.h>`, shipped with Debian's valgrind), so this
module compiles two small functions with the C compiler once per run and calls
them through ctypes; outside valgrind they do nothing.

Use: run the script under `command(...)`; in it, `marks = Marks.build(tmp)`, then
`marks.start()` before a phase and `marks.dump(name)` after it; afterwards
`totals(tmp)` gives the instructions of each phase by name.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
import sys
from pathlib import Path

SOURCE = r"""
#include <valgrind/callgrind.h>
/* Instrumentation on (valgrind retranslates the code it runs next), then the counts
   zeroed, so only what follows is counted. */
void marks_start(void) { CALLGRIND_START_INSTRUMENTATION; CALLGRIND_ZERO_STATS; }
/* The counts since marks_start written as one dump named `name`, then off again. */
void marks_dump(const char *name) {
    CALLGRIND_DUMP_STATS_AT(name);
    CALLGRIND_STOP_INSTRUMENTATION;
}
"""
TRIGGER = re.compile(r"^desc: Trigger: Client Request: (\w+)", re.M)
SUMMARY = re.compile(r"^summary: (\d+)", re.M)


class Marks:
    def __init__(self, library: ctypes.CDLL) -> None:
        self._start = library.marks_start
        self._dump = library.marks_dump
        self._dump.argtypes = [ctypes.c_char_p]

    @classmethod
    def build(cls, directory: Path) -> Marks:
        compiler = shutil.which("cc") or shutil.which("gcc")
        if compiler is None:
            raise SystemExit("counting instructions needs a C compiler (apt-get install gcc)")
        source, library = directory / "marks.c", directory / "marks.so"
        source.write_text(SOURCE)
        subprocess.run(
            [compiler, "-O1", "-shared", "-fPIC", "-o", str(library), str(source)], check=True
        )
        return cls(ctypes.CDLL(str(library)))

    def start(self) -> None:
        self._start()

    def dump(self, name: str) -> None:
        self._dump(name.encode())


def command(out_dir: Path, script: str, *args: str) -> list[str]:
    """`script` run by this Python under callgrind, instrumentation off until a mark."""
    if shutil.which("valgrind") is None:
        raise SystemExit("counting instructions needs valgrind (apt-get install valgrind)")
    return [
        "valgrind", "--tool=callgrind", "--instr-atstart=no",
        f"--callgrind-out-file={out_dir}/callgrind.out", f"--log-file={out_dir}/valgrind.log",
        sys.executable, script, *args,
    ]  # fmt: skip


def totals(out_dir: Path) -> dict[str, int]:
    """Instructions of each dump by its name (every thread of the process together)."""
    found: dict[str, int] = {}
    for dump in sorted(out_dir.glob("callgrind.out*")):
        text = dump.read_text(errors="replace")
        trigger, total = TRIGGER.search(text), SUMMARY.search(text)
        if trigger and total:
            found[trigger.group(1)] = int(total.group(1))
    return found
