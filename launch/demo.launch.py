"""Launch the simulated demo: sim_robot + evaluation_manager until the session's decision.

    ros2 launch evalstop demo.launch.py
    ros2 launch evalstop demo.launch.py success_rates:='[0.5, 0.9]' session_id:=demo2

The manager runs the installed ``config/eval.yaml`` (automatic scoring by sim_robot), prints
each trial and decision, and exits once the session is finished; launch then shuts down.
(Without ``ros2 launch``, e.g. ROS from PyPI wheels: ``ros2 run evalstop evalstop_demo`` or
``make demo`` do the same with separate processes.) Works with ROS 2 Humble, Jazzy and Kilted.
``operator_keys_file:=FILE`` makes the manager accept only signed scores and session control
(docs/integrity.md; ``make demo`` generates throw-away keys itself).
"""

from launch.actions import DeclareLaunchArgument, Shutdown
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from evalstop_ros.launch_parts import as_parameters, evalstop_node
from launch import LaunchDescription


def generate_launch_description():
    manager = evalstop_node(
        'evaluation_manager',
        # value_type=str: launch_ros would otherwise parse the text as YAML (session_id 0611 -> int)
        parameters=[{
            'config_file': ParameterValue(
                PathJoinSubstitution([FindPackageShare('evalstop'), 'config', 'eval.yaml']), value_type=str),
            **as_parameters(str, 'session_id', 'journal_dir', 'operator_keys_file'),
            'exit_on_finish': True,
            'journal_fsync': False,
        }],
        # the session is over (or the manager died): stop sim_robot and end the launch
        on_exit=Shutdown(reason='evaluation_manager exited'),
    )
    robot = evalstop_node(
        'sim_robot',
        parameters=[{
            'policies': ['policy_a', 'policy_b'],
            # parsed as YAML: a list of floats, an int
            'success_rates': LaunchConfiguration('success_rates'),
            'seed': LaunchConfiguration('seed'),
            'duration': 0.05,
        }],
    )
    return LaunchDescription([
        DeclareLaunchArgument('session_id', default_value='demo', description='Session id (journal name).'),
        DeclareLaunchArgument('journal_dir', default_value='/tmp/evalstop_demo', description='Journal directory.'),
        DeclareLaunchArgument('success_rates', default_value='[0.5, 0.8]',
                              description='Success rates of policy_a and policy_b in sim_robot.'),
        DeclareLaunchArgument('seed', default_value='0', description='sim_robot seed.'),
        DeclareLaunchArgument('operator_keys_file', default_value='',
                              description="Key file of the authorized operators (docs/integrity.md); empty: "
                                          "unauthenticated (the demo scores automatically, inside the manager)."),
        robot,
        manager,
    ])
