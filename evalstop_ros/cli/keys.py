"""``evalstop keys``: create the operator key files of authenticated scores and controls (docs/integrity.md)."""

from __future__ import annotations

import argparse
import pathlib

from ._common import CliError

DESCRIPTION = """\
`evalstop keys new OPERATOR... --dir DIR` draws a fresh key (from the OS) for every operator and
writes, readable by their owner only:

  DIR/operators.keys   every operator, for the manager (parameter operator_keys_file)
  DIR/OPERATOR.key     one operator's own line, for its terminal (teleop_scorer's key_file) or
                       for policy_runner (key_file); a ':' in a name becomes '_'

Existing files are not overwritten.  See docs/integrity.md."""
EPILOG = """\
example:
  evalstop keys new alice bob auto:runner --dir lab-keys

then give the files to the nodes:
  ros2 run evalstop evaluation_manager --ros-args -p operator_keys_file:=lab-keys/operators.keys
  ros2 run evalstop teleop_scorer --ros-args -p key_file:=lab-keys/alice.key

exit status: 0 keys written, 2 usage error (a file exists already, a bad operator name)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``evalstop keys new``."""
    sub = parser.add_subparsers(dest="keys_command", required=True)
    new = sub.add_parser("new", help="new keys for some operators")
    new.add_argument("operators", nargs="+", help="operator ids (1-64 characters of [A-Za-z0-9_.:@+-])")
    new.add_argument("--dir", default=".", help="where to write the key files (default: here)")


def run(args: argparse.Namespace) -> int:
    """Write the key files; 0 on success."""
    from ..session.auth import AuthError, new_keys, write_keys  # the session package: not for --help

    directory = pathlib.Path(args.dir)
    if len(set(args.operators)) != len(args.operators):
        raise CliError("an operator id is given twice")
    try:
        keys = new_keys(args.operators)
        paths = [directory / "operators.keys", *(directory / f"{op.replace(':', '_')}.key" for op in keys)]
        existing = [str(p) for p in paths if p.exists()]
        if existing:
            raise CliError(f"refusing to overwrite {', '.join(existing)}")
        directory.mkdir(parents=True, exist_ok=True)
        write_keys(paths[0], keys)
        for operator, path in zip(keys, paths[1:]):
            write_keys(path, {operator: keys[operator]})
    except AuthError as err:
        raise CliError(str(err)) from err
    print(f"manager:   {paths[0]}  (evaluation_manager operator_keys_file)")
    for operator, path in zip(keys, paths[1:]):
        print(f"{operator + ':':<10} {path}  (key_file)")
    return 0
