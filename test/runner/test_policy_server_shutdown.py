"""The policy server's Ctrl-C: with a runner connected, SIGINT (twice: the terminal's and ros2
launch's) closes the connection with 1001 and the process exits 0 at once (ros2 launch escalated
to SIGTERM after 5 s and printed ERROR lines when it did not)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_closes_the_open_connections_and_exits_0(how: signal.Signals) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "evalstop_ros.runner.server", "--policy", "good", "--port", "0",
                             "--ros-args", "-r", "__node:=policy_server"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(re.search(r"ws://127.0.0.1:(\d+)", proc.stdout.readline()).group(1))  # type: ignore[union-attr]
        with connect(f"ws://127.0.0.1:{port}", max_size=None, open_timeout=30) as ws:
            ws.recv(timeout=30)  # the metadata frame: the runner holds the connection open
            proc.send_signal(how)
            proc.send_signal(how)
            start = time.monotonic()
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=30)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
        assert proc.wait(timeout=30) == 0
        assert time.monotonic() - start < 5.0  # ros2 launch's SIGTERM comes after 5 s
        assert "policy server 'good' stopped" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
