"""test/launch: ``test_demo_launch.py`` is a ``launch_testing`` test, run by ``launch_test`` (``colcon test``:
``add_launch_test``; ``test_ros2_launch.py`` runs it so), not collected by pytest: launch_testing's pytest
plugin does not load under pytest 9 (pyproject.toml)."""

collect_ignore = ["test_demo_launch.py"]
