"""`python -m queuectl.agent.nvmlemu build | compile NODE.yaml | run NODE.yaml -- CMD...`.

build: print the directory of a fresh `libnvidia-ml.so.1`. compile: print (or `-o` write) the
library's input for a description. run: exec CMD on the emulated node (its environment set):
`python -m queuectl.agent.nvmlemu run queuectl/agent/scenarios/hgx-h100.yaml -- queuectl agent
--once` shows what the agent makes of an HGX H100.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from queuectl.agent.nvmlemu.build import (
    EmulatorBuildError,
    build_library,
    environment,
    load_description,
    write_description,
)
from queuectl.agent.nvmlemu.describe import DescriptionError, compile_description


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m queuectl.agent.nvmlemu", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build the library, print its directory")
    c = sub.add_parser("compile", help="compile a node description")
    c.add_argument("description", type=Path)
    c.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    r = sub.add_parser("run", help="run a command on the emulated node")
    r.add_argument("description", type=Path)
    r.add_argument("--scale", type=float, help="emulated seconds per real second (default 1)")
    r.add_argument("--offset", type=float, help="emulated time at the start (default 0)")
    r.add_argument("--clock-file", type=Path, help="emulated time is the number in this file")
    r.epilog = "then -- CMD [ARGS...]: the command to run"
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser().parse_args(argv[:split])
    command = argv[split + 1 :]
    try:
        if args.command == "build":
            print(build_library())
            return 0
        if args.command == "compile":
            if args.output is None:
                sys.stdout.write(compile_description(load_description(args.description)))
            else:
                write_description(args.description, args.output)
            return 0
        if not command:
            print("run: give the command after --", file=sys.stderr)
            return 2
        env = environment(
            write_description(args.description),
            build_library(),
            scale=args.scale,
            offset=args.offset,
            clock_file=args.clock_file,
        )
    except (DescriptionError, EmulatorBuildError) as exc:
        print(f"nvml-emu: {exc}", file=sys.stderr)
        return 1
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    sys.exit(main())
