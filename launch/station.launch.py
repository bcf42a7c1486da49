"""Launch one station of an evaluation hub: ``station_manager`` and the robot's runner.

    EVALSTOP_HUB_KEY=... ros2 launch evalstop station.launch.py hub_url:=http://hub:8765 station_id:=lab-a
    ros2 launch evalstop station.launch.py hub_url:=http://hub:8765 station_id:=lab-a \\
        hub_key_file:=/etc/evalstop/lab-a.key robot:=sim trials:=20
    ros2 run evalstop teleop_scorer     # operator terminal, when the runner does not score itself

The station node (``station_manager``) asks the hub for A/B work, runs each arm on
the runner, journals the result in ``journal_dir/hub-<station_id>/station.db`` first and
uploads it (later, in order, when the hub is unreachable). ``robot:=sim`` also starts
``sim_robot``, which runs the hub's simulated policy servers (``sim://success=P``) and scores
each rollout itself; ``robot:=none`` starts no runner (start the lab's ``policy_runner``, whose
``servers_file`` maps the hub's policy addresses to policy servers). The key comes from
``hub_key_file`` or ``$EVALSTOP_HUB_KEY``; it is never a launch argument.
"""

from launch.actions import DeclareLaunchArgument, Shutdown
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PythonExpression

from evalstop_ros.launch_parts import as_parameters, evalstop_node, session_arguments, typed
from launch import LaunchDescription


def generate_launch_description():
    robot = LaunchConfiguration('robot')
    namespace = LaunchConfiguration('namespace')
    return LaunchDescription([
        DeclareLaunchArgument('hub_url', description='URL of the evaluation hub, e.g. http://hub:8765.'),
        DeclareLaunchArgument('station_id', description="This station's id at the hub."),
        DeclareLaunchArgument('hub_key_file', default_value='',
                              description='File with the station key (empty: $EVALSTOP_HUB_KEY).'),
        DeclareLaunchArgument('trials', default_value='0',
                              description='A/B trials to run, then exit (0: run until stopped).'),
        DeclareLaunchArgument('robot', default_value='sim', choices=['sim', 'none'],
                              description='sim: start sim_robot; none: the lab starts its own runner.'),
        DeclareLaunchArgument('runner_action', default_value='run_trial', description='RunTrial action of the runner.'),
        DeclareLaunchArgument('scoring', default_value='auto', choices=['auto', 'operator'],
                              description="auto: the runner's score (the operator's where it sends none); "
                              'operator: teleop_scorer scores every run. Journaled on the first start.'),
        DeclareLaunchArgument('goal_key_file', default_value='',
                              description="The runner key file of the station and its runner (`evalstop keys new "
                                          "runner`): the policy server's address in a runner goal is sealed for the "
                                          "runner. Empty: in clear."),
        DeclareLaunchArgument('allow_unsealed',
                              default_value=PythonExpression(["'true' if '", robot, "' == 'sim' else 'false'"]),
                              description='Run without goal_key_file (goals carry the address in clear); default '
                                          'false with robot:=none (a lab\'s own runner).'),
        *session_arguments(),
        DeclareLaunchArgument('sim_duration', default_value='1.0', description='sim_robot: rollout duration (s).'),
        DeclareLaunchArgument('sim_seed', default_value='0', description='sim_robot: seed of the outcomes.'),
        evalstop_node(
            'station_manager', namespace=namespace,
            parameters=[{
                **as_parameters(str, 'hub_url', 'station_id', 'hub_key_file', 'runner_action', 'journal_dir',
                                'goal_key_file'),
                'hub_trials': typed('trials', int), 'hub_scoring': typed('scoring'),
                'allow_unsealed': LaunchConfiguration('allow_unsealed'),
                'exit_on_finish': PythonExpression([LaunchConfiguration('trials'), ' > 0']),
            }],
            on_exit=Shutdown(reason='station_manager exited'),
        ),
        evalstop_node(
            'sim_robot', namespace=namespace,
            parameters=[{'action_name': typed('runner_action'), 'duration': typed('sim_duration', float),
                         'seed': typed('sim_seed', int), 'goal_key_file': typed('goal_key_file')}],
            condition=IfCondition(PythonExpression(["'", robot, "' == 'sim'"])),
        ),
    ])
