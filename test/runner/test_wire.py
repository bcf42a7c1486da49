"""openpi's msgpack-numpy format and the metadata frame, in the project's own implementation."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from evalstop_ros.runner import wire
from evalstop_ros.runner.client import ServerConfig
from evalstop_ros.runner.errors import RunnerError


def test_arrays_and_scalars_round_trip_with_dtype_and_shape() -> None:
    message = {"a": np.arange(12, dtype=">i4").reshape(3, 4), "img": np.zeros((2, 3, 3), np.uint8),
               "f": np.float32(2.5), "b": np.bool_(True), "s": "text", "n": [1, 2.0, None],
               "t": np.asfortranarray(np.arange(6.0).reshape(2, 3))}
    back = wire.unpack(wire.pack(message))
    for key in ("a", "img", "t"):
        assert back[key].dtype == message[key].dtype and back[key].shape == message[key].shape
        assert np.array_equal(back[key], message[key])
    assert back["f"] == np.float32(2.5) and type(back["f"]) is np.float32
    assert type(back["b"]) is np.bool_ and back["s"] == "text" and back["n"] == [1, 2.0, None]


def test_numpy_values_travel_as_maps_with_bytes_keys() -> None:
    raw = msgpack.unpackb(wire.pack({"x": np.ones(2, "<f8")}), strict_map_key=False)
    assert raw["x"] == {b"__ndarray__": True, b"data": np.ones(2, "<f8").tobytes(), b"dtype": "<f8", b"shape": [2]}


def test_object_arrays_are_refused_and_garbage_is_a_runner_error() -> None:
    with pytest.raises(RunnerError, match="object"):
        wire.pack({"x": np.array([object()])})
    with pytest.raises(RunnerError, match="malformed reply"):
        wire.unpack(b"\xc1\xc1")


def test_metadata_defaults_follow_roboarena_and_bad_values_are_refused() -> None:
    plain = ServerConfig.from_metadata({})
    assert plain.image_resolution == (224, 224) and plain.n_external_cameras == 1 and not plain.roboarena
    assert ServerConfig.from_metadata({"image_resolution": None}).image_resolution is None
    with pytest.raises(RunnerError, match="action space 'cartesian_position'"):
        ServerConfig.from_metadata({"action_space": "cartesian_position"})
    with pytest.raises(RunnerError, match="3 external cameras"):
        ServerConfig.from_metadata({"n_external_cameras": 3})
    with pytest.raises(RunnerError, match="metadata is invalid"):
        ServerConfig.from_metadata({"image_resolution": [0, 5]})
