"""Run a long build step with its output in a log and a progress line now and then on the terminal.

    python3 tools/build_progress.py --log FILE --kind pip|colcon [--label TEXT] [--tag NAME] -- COMMAND ...

``colcon``: a line each time CMake's percentage of a package passes another tenth, with the time
so far and the time left at that pace (``colcon: evalstop 40 % after 52 s, about 78 s left``), and
each package it starts and finishes. ``pip``: a line per ten packages collected and when it installs them (pip
does not say how many there will be, so no time left). On failure: the log's last 60 lines.
The exit status is the command's. Standard library only (it runs before the venv exists).
"""

from __future__ import annotations

import argparse
import pathlib
import re
import subprocess
import sys
import time

PERCENT = re.compile(r"^\[\s*(\d+)%\]")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", required=True, help="file the command's output goes to")
    parser.add_argument("--kind", choices=("pip", "colcon"), required=True)
    parser.add_argument("--label", default="", help="what the step does, printed first")
    parser.add_argument("--tag", default="", help="put before every progress line (builds running side by side)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    log = pathlib.Path(args.log)
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()

    def say(text: str) -> None:
        print(f"  {args.tag + ': ' if args.tag else ''}{text}", flush=True)

    if args.label:
        print(f"{args.label} (log: {log})", flush=True)
    tenth, collected, package, package_start = 0, 0, "", start
    with log.open("w", encoding="utf-8") as out:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            out.flush()
            elapsed = time.monotonic() - start
            if args.kind == "colcon":
                found = PERCENT.match(line)
                if found and int(found.group(1)) // 10 > tenth and int(found.group(1)) > 0:
                    tenth = int(found.group(1)) // 10
                    share, spent = int(found.group(1)) / 100, time.monotonic() - package_start
                    say(f"colcon: {package} {found.group(1)} % after {spent:.0f} s, about "
                        f"{spent * (1 - share) / share:.0f} s left")
                elif line.startswith(("Starting >>>", "Finished <<<", "Failed <<<")):
                    if line.startswith("Starting >>>"):  # CMake counts each package from 0 %
                        tenth, package, package_start = 0, line.split()[-1], time.monotonic()
                    say(f"colcon: {line.strip()} ({elapsed:.0f} s)")
            elif line.startswith("Collecting "):
                collected += 1
                if collected % 10 == 0:
                    say(f"pip: {collected} packages collected after {elapsed:.0f} s (now {line.split()[1]})")
            elif line.startswith("Installing collected packages"):
                say(f"pip: installing the {collected} packages collected ({elapsed:.0f} s so far)")
        code = proc.wait()
    if code != 0:
        print("".join(log.read_text(encoding="utf-8", errors="replace").splitlines(True)[-60:]), file=sys.stderr)
        print(f"failed after {time.monotonic() - start:.0f} s (exit {code}); the whole output: {log}", file=sys.stderr)
    else:
        say(f"done in {time.monotonic() - start:.0f} s")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
