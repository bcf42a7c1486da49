"""Every operator-facing input of the CLI takes any bytes: random bytes as arguments (as Python hands
them on, lone surrogates for what is not UTF-8) and as the contents of every input file end in a
clear answer -- an exit status of 0, 1 or 2 and at most a one-line error -- never a traceback,
whatever the output streams' encoding."""

from __future__ import annotations

import io
import pathlib
import random
import sys

import pytest

from evalstop_ros.cli.main import main

#: Arguments per verb; ``T`` is a random token, ``F`` a file of random bytes, ``D`` the test's directory.
SHAPES: dict[str, list[list[str]]] = {
    "analyze": [["F"], ["F", "--method", "T"], ["F", "--policy-a", "T", "--json"]],
    "adastop": [["F"], ["F", "--n-per-interim", "T"]],
    "simulate": [["--method", "T"], ["--p0", "T", "--p1", "0.5"]],
    "step": [["check", "--n-max", "T"], ["T"]],
    "audit": [["F"], ["F", "--json"], ["F", "--key", "T"]],
    "report": [["F", "-o", "D/out"]],
    "rank": [["F"], ["F", "--model", "T", "--json"]],
    "keys": [["new", "T", "--dir", "D/keys"]],
    "hub": [["add-policy", "--db", "D/hub.sqlite", "T", "T"], ["add-station", "--db", "D/hub.sqlite", "T",
                                                                "--key-file", "D/station.key"],
            ["analyze", "F"], ["T"]],
    # a recording that starts stops by itself (inside the ROS environment it would record until Ctrl-C)
    "record": [["T"], ["--output", "T", "--duration", "0.5"]],
}
#: Valid text a random file may start with, so that parsing gets past the first line.
PREFIXES = (b"", b"a,b\n", b"policy_a,policy_b\n1,0\n", b"{\"seq\": 1}\n", b"policies: [a, b]\n")


def _token(rng: random.Random) -> str:
    raw = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 24)))
    return raw.decode("utf-8", "surrogateescape")  # what Python makes of such an argv element


def _argv(rng: random.Random, verb: str, shape: list[str], directory: pathlib.Path) -> list[str]:
    out = [verb]
    for part in shape:
        if part == "T":
            out.append(_token(rng))
        elif part == "F":
            path = directory / f"input-{rng.randrange(10**9)}.bin"
            path.write_bytes(rng.choice(PREFIXES) + bytes(rng.randrange(256) for _ in range(rng.randrange(64))))
            out.append(str(path))
        else:
            out.append(part.replace("D/", f"{directory}/"))
    return out


@pytest.mark.parametrize("verb", sorted(SHAPES))
@pytest.mark.parametrize("encoding", ["utf-8", "ascii"])
def test_random_bytes_in_every_input_give_a_clear_answer(verb: str, encoding: str, tmp_path: pathlib.Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(f"{verb}-{encoding}")
    monkeypatch.chdir(tmp_path)
    for round_ in range(12):
        argv = _argv(rng, verb, SHAPES[verb][round_ % len(SHAPES[verb])], tmp_path)
        out, err = (io.TextIOWrapper(io.BytesIO(), encoding=encoding) for _ in range(2))
        monkeypatch.setattr(sys, "stdout", out)
        monkeypatch.setattr(sys, "stderr", err)
        status = main(argv)
        err.flush()
        text = err.buffer.getvalue().decode(encoding)  # type: ignore[attr-defined]
        assert status in (0, 1, 2), (argv, status, text)
        assert "Traceback" not in text, (argv, text)
        if status == 2:
            assert text.count("error:") == 1, (argv, text)
