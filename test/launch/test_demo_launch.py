"""demo.launch.py under launch_testing: the session reaches its decision, the manager exits 0 by
itself and its exit ends the launch (``on_exit=Shutdown()``); every process exits cleanly.

It runs under ``launch_test`` (``colcon test``: ``add_launch_test`` in CMakeLists.txt;
``test_ros2_launch.py`` runs it so in ``make test``, under ROS 2 Jazzy's launch_testing and again
under Kilted). pytest does not collect it (``conftest.py``).
"""

import tempfile
import unittest

import launch_testing.actions
import launch_testing.asserts
import pytest
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import PathJoinSubstitution
from launch_ros.substitutions import FindPackageShare

import launch


@pytest.mark.launch_test
def generate_test_description():
    demo = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(PathJoinSubstitution([FindPackageShare('evalstop'), 'launch', 'demo.launch.py'])),
        # far-apart policies: the session decides in a few pairs (the default 0.5 vs 0.8 takes about 45)
        launch_arguments={'session_id': 'launch_test', 'journal_dir': tempfile.mkdtemp(prefix='evalstop-'),
                          'success_rates': '[0.05, 0.95]'}.items(),
    )
    return launch.LaunchDescription([demo, launch_testing.actions.ReadyToTest()])


class TestDemoSession(unittest.TestCase):

    def test_session_reaches_a_decision_and_the_manager_exits(self, proc_output, proc_info):
        proc_output.assertWaitFor('session launch_test finished', timeout=180)
        proc_output.assertWaitFor('tests decided', timeout=10)
        # the manager ends by itself (exit_on_finish), not because the test ended the launch
        proc_info.assertWaitForShutdown(process='evaluation_manager', timeout=60)


@launch_testing.post_shutdown_test()
class TestDemoExit(unittest.TestCase):

    def test_the_manager_exits_0(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info, process='evaluation_manager')

    def test_every_process_exits_cleanly(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info)
