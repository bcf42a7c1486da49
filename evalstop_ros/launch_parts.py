"""What the launch files (``launch/*.launch.py``) share: the nodes, typed launch arguments, the common arguments.

Only launch APIs of ROS 2 Humble, Jazzy and Kilted; ``launch`` is imported where a launch file calls for it.
"""

__all__ = ["MAX_ARMS", "SIMULATED_ROBOTS", "arm_namespaces", "arm_runners", "as_parameters", "evalstop_node",
           "session_arguments", "typed"]

#: The most arms one launch starts (the session config's limit on ``runner.runners``).
MAX_ARMS = 64
#: Robots whose arms one launch can start alike (simulated); a real arm needs its own hardware settings.
SIMULATED_ROBOTS = ('sim', 'sim_policy')


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


def arm_namespaces(namespace, arms, robot):
    """The namespace of each arm's runner for ``arms:=ARMS`` (docs/parallel.md).

    One arm: the launch's ``namespace`` (the runner beside the manager). Several: ``<namespace>/arm_<k>``, one
    namespace per arm, so each arm's ``run_trial`` action is the manager's ``arm_<k>/run_trial``
    (:func:`arm_runners`). Several arms need a simulated ``robot`` (:data:`SIMULATED_ROBOTS`).

    :param namespace: The launch's ``namespace`` argument (``''``: the root).
    :param arms: The ``arms`` argument as given (text).
    :param robot: The ``robot`` argument.
    :raises ValueError: ``arms`` is not a whole number from 1 to :data:`MAX_ARMS`, or several arms of a real robot.

    >>> arm_namespaces('', '1', 'droid')
    ['']
    >>> arm_namespaces('lab1', '2', 'sim')
    ['lab1/arm_1', 'lab1/arm_2']
    >>> arm_namespaces('', '2', 'sim_policy')
    ['arm_1', 'arm_2']
    >>> arm_namespaces('', 'two', 'sim')
    Traceback (most recent call last):
    ...
    ValueError: `arms` must be a whole number from 1 to 64; found 'two'
    """
    text = arms.strip()
    count = int(text) if text.isdigit() else 0
    if not 1 <= count <= MAX_ARMS:
        raise ValueError(f"`arms` must be a whole number from 1 to {MAX_ARMS}; found {arms!r}")
    if count == 1:
        return [namespace]
    if robot not in SIMULATED_ROBOTS:
        raise ValueError(
            f"`arms:={arms}` needs a simulated robot ({', '.join(SIMULATED_ROBOTS)}); found robot:={robot}: each "
            "real arm has its own hardware settings, so start one policy_runner per arm in its namespace "
            "(arm_1, arm_2, ...) and list their actions in the config's runner.runners (docs/parallel.md)")
    base = namespace.rstrip('/')
    return [f'{base}/arm_{k}' if base else f'arm_{k}' for k in range(1, count + 1)]


def arm_runners(namespaces):
    """The manager's ``runners`` parameter for the arms of :func:`arm_namespaces`: each arm's ``run_trial``,
    relative to the manager's namespace; none for one arm (the config's runner).

    >>> arm_runners(['lab1/arm_1', 'lab1/arm_2']), arm_runners([''])
    ({'runners': ['arm_1/run_trial', 'arm_2/run_trial']}, {})
    """
    if len(namespaces) == 1:
        return {}
    return {'runners': [f'arm_{k}/run_trial' for k in range(1, len(namespaces) + 1)]}
