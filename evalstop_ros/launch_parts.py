"""What the launch files (``launch/*.launch.py``) share: the nodes, typed launch arguments, the common arguments.

Only launch APIs of ROS 2 Humble, Jazzy and Kilted; ``launch`` is imported where a launch file calls for it.
"""

__all__ = ["as_parameters", "evalstop_node", "session_arguments", "typed"]


def evalstop_node(executable, *, tty=True, **options):
    """The package's node ``scripts/<executable>``, named ``executable``, its output on the screen
    (``tty``: through a pseudo-terminal, which keeps the log's colours and line buffering);
    ``options`` as :class:`launch_ros.actions.Node` takes them (``namespace``, ``parameters``,
    ``condition``, ``on_exit``, ...)."""
    from launch_ros.actions import Node

    return Node(package='evalstop', executable=executable, name=executable, output='screen', emulate_tty=tty,
                **options)


def typed(argument, value_type=str):
    """The launch argument ``argument`` as a parameter value of ``value_type`` (without it launch_ros
    would parse the text as YAML: a session id ``0611`` would become an int)."""
    from launch.substitutions import LaunchConfiguration
    from launch_ros.parameter_descriptions import ParameterValue

    return ParameterValue(LaunchConfiguration(argument), value_type=value_type)


def as_parameters(value_type, *arguments):
    """Each launch argument of ``arguments`` as the node's parameter of the same name, of ``value_type``."""
    return {name: typed(name, value_type) for name in arguments}


def session_arguments():
    """``namespace`` and ``journal_dir``: the launch arguments of every launch of a session or a station."""
    from launch.actions import DeclareLaunchArgument

    return [
        DeclareLaunchArgument('namespace', default_value='', description='Namespace of every node.'),
        DeclareLaunchArgument('journal_dir', default_value='',
                              description='Journal directory (empty: $ROS_HOME/evalstop).'),
    ]
