"""`python -m queuectl.crds [--check]`: regenerate the CRD YAML, or fail if it drifted."""

from __future__ import annotations

import argparse
import sys

from queuectl.crds.render import CRD_DIR, drifted, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m queuectl.crds", description=__doc__)
    parser.add_argument("--check", action="store_true", help="only report drift, write nothing")
    args = parser.parse_args(argv)
    if args.check:
        stale = drifted()
        for name in stale:
            print(f"{CRD_DIR / name} is out of date: run python -m queuectl.crds", file=sys.stderr)
        return 1 if stale else 0
    for path in write():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
