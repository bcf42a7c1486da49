"""Launch an evalstop evaluation: the manager, the robot's runner, and optionally the operator terminal.

    ros2 launch evalstop eval.launch.py robot:=droid session_id:=2025-06-11-droid
    ros2 launch evalstop eval.launch.py robot:=sim namespace:=lab1
    ros2 launch evalstop eval.launch.py robot:=sim_policy
    ros2 launch evalstop eval.launch.py robot:=sim arms:=2   # two arms, one session (docs/parallel.md)
    ros2 run evalstop teleop_scorer --ros-args -r __ns:=/lab1   # operator terminal (e.g. over SSH)

``robot:=sim`` also starts ``sim_robot`` (the config's runner, ``run_trial`` in the
namespace). ``robot:=sim_policy`` starts two scripted openpi-protocol policy servers
(``policy_server``) and ``policy_runner`` with its simulated arm. ``droid`` and ``widowx`` start
``policy_runner`` with the DROID / WidowX adapter at the config's ``runner.action_name``
(``/droid/run_trial``, ``/widowx/run_trial``), querying the policy servers of ``servers_file``
(default: the installed ``config/<robot>_servers.yaml``; edit it, or pass your own).
``droid_cameras`` maps DROID's image keys to the protocol's cameras
(``droid_cameras:="[24259877_left=exterior_image_1_left, 13062452_left=wrist_image_left]"``).
``arms:=N`` (simulated robots) starts
each arm's runner in its own namespace ``arm_1`` ... ``arm_N`` and has the manager dispatch the session's
trials to all of them at once (its ``runners`` parameter). ``config_file`` defaults to the installed preset of the robot. The launch ends when the session
is finished or aborted (``exit_on_finish:=false`` keeps the manager up afterwards). ``use_teleop:=true`` opens the operator terminal with
``teleop_prefix`` (default ``xterm -e``; the terminal needs a keyboard). Works with ROS 2
Humble, Jazzy and Kilted.

Authentication (docs/integrity.md): ``operator_keys_file:=operators.keys`` makes the manager accept
only scores, corrections and session control signed by the operators listed there;
``teleop_key_file:=alice.key`` and ``runner_key_file:=runner.key`` give the terminal and
policy_runner (its emergency-stop pause) their keys (``evalstop keys new alice auto:runner``).
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution, PythonExpression
from launch_ros.substitutions import FindPackageShare

from evalstop_ros.launch_parts import (
    arm_namespaces,
    arm_runners,
    as_parameters,
    evalstop_node,
    session_arguments,
    typed,
)
from launch import LaunchDescription

#: robot -> installed session preset (share/evalstop/config/)
PRESETS = {'sim': 'eval.yaml', 'sim_policy': 'sim_policy.yaml', 'droid': 'droid.yaml', 'widowx': 'widowx.yaml'}
#: robot -> (policy_runner's robot adapter, RunTrial action name of the preset)
RUNNERS = {'sim': ('sim', 'run_trial'), 'sim_policy': ('sim', 'run_trial'),
           'droid': ('droid', '/droid/run_trial'), 'widowx': ('widowx', '/widowx/run_trial')}
#: robot -> policy_runner's steps per episode (15 Hz): the simulated arm's task takes 1-3 s when it
#: succeeds (its rollouts end there: task_done), so 4 s ends a failed one; a real robot gets 26.7 s
HORIZONS = {'sim': 400, 'sim_policy': 60, 'droid': 400, 'widowx': 400}
#: robots whose operator confirms each scene reset before the robot starts (manager's confirm_reset)
CONFIRMED = ('sim_policy', 'droid', 'widowx')
#: default camera map of the DROID adapter (policy_runner's droid.cameras): set your ZED serials
DROID_CAMERAS = '[<serial>_left=exterior_image_1_left]'


def _session_nodes(context):
    """The manager and each arm's runner (``arms``, :func:`~evalstop_ros.launch_parts.arm_namespaces`; a bad
    value ends the launch with its reason before any node starts)."""
    robot, namespace = LaunchConfiguration('robot'), LaunchConfiguration('namespace')
    arms = arm_namespaces(namespace.perform(context), LaunchConfiguration('arms').perform(context),
                          robot.perform(context))
    served = PythonExpression(["'", robot, "' in ('sim_policy', 'droid', 'widowx')"])
    manager = evalstop_node(
        'evaluation_manager', namespace=namespace,
        parameters=[{
            **as_parameters(str, 'config_file', 'session_id', 'journal_dir', 'operator_keys_file', 'goal_key_file'),
            **as_parameters(int, 'thread_priority'), **as_parameters(bool, 'exit_on_finish'),
            'confirm_reset': LaunchConfiguration('confirm_reset'), 'allow_unsigned': LaunchConfiguration('allow_unsigned'),
            'allow_unsealed': LaunchConfiguration('allow_unsealed'), **arm_runners(arms),
        }],
        # the session lives in the manager: when it exits (finished, aborted, or died),
        # stop the runners and the terminal too. (A runner's or the terminal's death does
        # not end the session: the manager waits for them and pauses after runner faults.)
        on_exit=Shutdown(reason='evaluation_manager exited'),
    )
    runners = [(
        evalstop_node(
            'sim_robot', namespace=arm,
            # (PythonExpression, not LaunchConfigurationEquals: deprecated since Iron, and
            # EqualsSubstitution does not exist in Humble)
            parameters=[{'goal_key_file': typed('goal_key_file')}],
            condition=IfCondition(PythonExpression(["'", robot, "' == 'sim'"])),
        ),
        evalstop_node(
            'policy_runner', namespace=arm,
            parameters=[{
                'servers_file': typed('servers_file'),
                'robot': PythonExpression([repr({k: v[0] for k, v in RUNNERS.items()}), "['", robot, "']"]),
                'action_name': PythonExpression([repr({k: v[1] for k, v in RUNNERS.items()}), "['", robot, "']"]),
                # a YAML list of strings (launch_ros parses the text); read by the droid adapter only
                'droid.cameras': LaunchConfiguration('droid_cameras'),
                'key_file': typed('runner_key_file'), 'max_steps': typed('max_steps', int),
                'goal_key_file': typed('goal_key_file'),
            }],
            condition=IfCondition(served),
        )) for arm in arms]
    return [manager, *(node for pair in runners for node in pair)]


def generate_launch_description():
    robot = LaunchConfiguration('robot')
    namespace = LaunchConfiguration('namespace')
    preset = PythonExpression([repr(PRESETS), "['", robot, "']"])
    # the scripted policy servers of robot:=sim_policy (ports as in config/sim_policy_servers.yaml)
    policy_servers = [
        evalstop_node(
            'policy_server', tty=False,
            arguments=['--policy', kind, '--port', port],
            condition=IfCondition(PythonExpression(["'", robot, "' == 'sim_policy'"])),
        )
        for kind, port in (('good', LaunchConfiguration('good_port')), ('bad', LaunchConfiguration('bad_port')))
    ]
    return LaunchDescription([
        DeclareLaunchArgument('robot', default_value='sim', choices=list(PRESETS),
                              description='Robot: sim (starts sim_robot), sim_policy (policy servers + '
                                          'policy_runner on a simulated arm), droid or widowx (policy_runner).'),
        DeclareLaunchArgument('arms', default_value='1',
                              description="Arms serving the session at once, 1 to 64: several start each arm's "
                                          'runner in its own namespace arm_1, arm_2, ... (robot sim or sim_policy); '
                                          "the manager dispatches the plan's trials to all of them (docs/parallel.md)."),
        DeclareLaunchArgument('good_port', default_value='8101',
                              description="robot:=sim_policy: port of the 'good' scripted policy server "
                                          '(as servers_file says).'),
        DeclareLaunchArgument('bad_port', default_value='8102',
                              description="robot:=sim_policy: port of the 'bad' scripted policy server "
                                          '(as servers_file says).'),
        DeclareLaunchArgument('servers_file',
                              default_value=PathJoinSubstitution([
                                  FindPackageShare('evalstop'), 'config',
                                  # (not a nested list [robot, '_servers.yaml']: Kilted-only)
                                  PythonExpression(["'", robot, "_servers.yaml'"])]),
                              description='Policy id -> policy server map of policy_runner '
                                          '(default: config/<robot>_servers.yaml).'),
        DeclareLaunchArgument('confirm_reset',
                              default_value=PythonExpression(["'true' if '", robot, "' in ", repr(CONFIRMED),
                                                              " else 'false'"]),
                              description='The operator confirms each scene reset (Enter in teleop_scorer) before '
                                          'the robot starts; default true for the real robots and sim_policy. '
                                          'Part of the pre-registered design (the session config\'s confirm_reset).'),
        DeclareLaunchArgument('droid_cameras', default_value=DROID_CAMERAS,
                              description='robot:=droid: camera map of policy_runner (droid.cameras), a list of '
                                          '<DROID image key>=<camera name>, e.g. "[24259877_left=exterior_image_1_left, '
                                          '13062452_left=wrist_image_left]".'),
        DeclareLaunchArgument('max_steps',
                              default_value=PythonExpression([repr(HORIZONS), "['", robot, "']"]),
                              description='Steps per episode of policy_runner at 15 Hz (a failed rollout ends '
                                          'there): 60 for sim_policy, 400 (26.7 s) for the real robots.'),
        DeclareLaunchArgument('config_file',
                              default_value=PathJoinSubstitution([FindPackageShare('evalstop'), 'config', preset]),
                              description='Session config (YAML); default: the preset of `robot`.'),
        *session_arguments(),
        DeclareLaunchArgument('session_id', default_value='',
                              description='Session id; reuse one to resume its journal. Empty: <config>-<UTC time>.'),
        DeclareLaunchArgument('exit_on_finish', default_value='true', choices=['true', 'false'],
                              description='End the launch when the session is finished or aborted (the manager '
                                          'exits, the others follow); false keeps the manager up for a dashboard.'),
        DeclareLaunchArgument('use_teleop', default_value='false', choices=['true', 'false'],
                              description='Open the operator terminal (teleop_scorer).'),
        DeclareLaunchArgument('teleop_prefix', default_value='xterm -e',
                              description='Terminal the operator terminal runs in.'),
        DeclareLaunchArgument('operator_keys_file', default_value='',
                              description="The manager's key file of the authorized operators (empty: scores "
                                          "and controls are NOT authenticated)."),
        DeclareLaunchArgument('allow_unsigned',
                              default_value=PythonExpression(["'false' if '", robot, "' in ('droid', 'widowx') "
                                                              "else 'true'"]),
                              description='Run without operator_keys_file (unsigned scores and controls); default '
                                          'false for the real robots (droid, widowx): make keys with '
                                          '`evalstop keys new` (docs/integrity.md).'),
        DeclareLaunchArgument('teleop_key_file', default_value='',
                              description="The operator terminal's key file (signs scores and undo)."),
        DeclareLaunchArgument('runner_key_file', default_value='',
                              description="policy_runner's key file (signs its emergency-stop pause)."),
        DeclareLaunchArgument('goal_key_file', default_value='',
                              description="The runner key file of the manager and the runner (`evalstop keys new "
                                          "runner`): what identifies the policy in a runner goal is sealed for the "
                                          "runner (docs/deploying.md). Empty: goals carry the policy in clear."),
        DeclareLaunchArgument('allow_unsealed',
                              default_value=PythonExpression(["'false' if '", robot, "' in ('droid', 'widowx') "
                                                              "else 'true'"]),
                              description='Run without goal_key_file (runner goals carry the policy in clear); '
                                          'default false for the real robots (droid, widowx).'),
        DeclareLaunchArgument('thread_priority', default_value='0',
                              description='SCHED_FIFO priority (1-99) of the manager and the operator terminal '
                                          '(needs CAP_SYS_NICE or an rtprio limit; docs/ros.md); 0: normal scheduling.'),
        # first: a bad `arms` ends the launch before any node starts
        OpaqueFunction(function=_session_nodes),
        *policy_servers,
        evalstop_node(
            'teleop_scorer', tty=False, namespace=namespace, prefix=LaunchConfiguration('teleop_prefix'),
            parameters=[{'key_file': typed('teleop_key_file'), **as_parameters(int, 'thread_priority')}],
            condition=IfCondition(LaunchConfiguration('use_teleop')),
        ),
    ])
