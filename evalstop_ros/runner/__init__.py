"""Running served policies on robots (ROS-free, importable without rclpy): the openpi client, the command guard, the adapters.

This file imports nothing, so ``evalstop_ros.runner.scripted`` loads in a venv without the
project's dependencies.
"""
