#!/usr/bin/env python3
"""Rewrite the wheel builder's hard-coded paths in a ROS-from-PyPI venv.

The `ros-*` Kilted wheels ship CMake export files (share/*/cmake/*.cmake) whose
`*__rosidl_generator_py` targets list the build machine's include dirs:

    /opt/python/cp311-cp311/include/python3.11
    /opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include

CMake refuses to generate ("Imported target ... includes non-existent path")
as soon as a package depends on any message package.  This script replaces
them with this venv's real Python include dir (sysconfig) and numpy include
dir (numpy.get_include()).  It only touches *.cmake files under VENV/share and
VENV/lib/cmake, so it is idempotent: a second run finds nothing to change.
Re-run it after every `pip install` of further ros-* wheels.

Usage: VENV/bin/python fix_wheel_paths.py [VENV]   (default: sys.prefix)
Must run under the venv's python (it imports numpy from the venv).
"""
import pathlib
import sys
import sysconfig

OLD_ROOT = '/opt/python/cp311-cp311'
OLD_PY_INC = OLD_ROOT + '/include/python3.11'
OLD_NP_INC = OLD_ROOT + '/lib/python3.11/site-packages/numpy/_core/include'


def main() -> int:
    venv = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else sys.prefix).resolve()
    import numpy

    py_inc = sysconfig.get_paths()['include']
    np_inc = numpy.get_include()
    for needed in (py_inc + '/Python.h', np_inc + '/numpy/arrayobject.h'):
        if not pathlib.Path(needed).is_file():
            print(f'fix_wheel_paths: missing {needed} (python dev headers / numpy?)', file=sys.stderr)
            return 1
    # Longest first so the numpy path is not half-rewritten by a shorter match.
    repl = [(OLD_NP_INC, np_inc), (OLD_PY_INC, py_inc)]

    files = [p for d in (venv / 'share', venv / 'lib' / 'cmake') if d.is_dir() for p in d.rglob('*.cmake')]
    changed = 0
    for path in files:
        text = path.read_text(errors='surrogateescape')
        if OLD_ROOT not in text:
            continue
        new = text
        for old, cur in repl:
            new = new.replace(old, cur)
        if new != text:
            path.write_text(new, errors='surrogateescape')
            changed += 1
    left = [str(p) for p in files if OLD_ROOT in p.read_text(errors='surrogateescape')]
    print(f'fix_wheel_paths: {changed} file(s) rewritten in {venv} '
          f'(python include {py_inc}, numpy include {np_inc})')
    if left:  # an unknown /opt/python/... path: report it instead of guessing
        print('fix_wheel_paths: still referencing ' + OLD_ROOT + ':\n  ' + '\n  '.join(left), file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
