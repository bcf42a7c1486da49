"""pytest set-up of the whole tree: the doctests under evalstop_ros (kept out of the installed
package) and the markers of the test tiers (``ros``, ``netns``; docs/testing.md).

``evalstop_ros/qos.py``, ``evalstop_ros/nodes/``, ``evalstop_ros/audit/recorder.py`` and
``evalstop_ros/runner/adapters/ros2.py`` import rclpy and the generated ``evalstop`` interfaces,
which load only inside the ROS environment (``tools/ros/env.sh``, as ``make test`` runs pytest),
and so do modules under ``test/nodes`` and ``test/launch``. In a plain ``pytest`` run without
it (``make check``), their doctests and those two test directories (every test there needs the
ROS environment: marked ``ros`` below) are left out instead of failing to import; ``make test``
sets ``EVALSTOP_ROS_REQUIRED=1`` so that a broken ROS set-up fails loudly and nothing is left out.
"""

import os
import pathlib
import signal

# One thread per OpenMP/BLAS pool (PyTorch, numpy's OpenBLAS) in every test process and the node
# processes it starts: the tests run side by side (`make test`'s runs and their pytest-xdist
# workers, `make check`'s workers) on 2 cores, where the spinning threads of several processes'
# pools wasted most of the CPU (test_surrogate.py 157 s and test_shrinkage.py 119 s beside the ROS
# runs; 3 s and 4 s with one thread). Set before numpy or torch is imported (they read it then).
for _pool in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_pool, "1")

import pytest  # noqa: E402

# A shell starts a background job (`make test` runs three test runs side by side) with SIGINT and
# SIGQUIT ignored, and every process inherits an ignored signal through exec: `ros2 launch` and the
# nodes the tests start would then never see the Ctrl-C that stops them (the launch tests failed
# so). A Python handler is reset to the default on exec, so the children start with the default.
for _signal in (signal.SIGINT, signal.SIGQUIT):
    if signal.getsignal(_signal) == signal.SIG_IGN:
        signal.signal(_signal, signal.default_int_handler if _signal == signal.SIGINT else signal.SIG_DFL)

try:
    import rclpy  # noqa: F401
    from evalstop.msg import SessionStatus  # noqa: F401
except ImportError:
    if os.environ.get("EVALSTOP_ROS_REQUIRED"):
        raise
    collect_ignore = ["evalstop_ros/qos.py", "evalstop_ros/ros_context.py", "evalstop_ros/nodes",
                      "evalstop_ros/audit/recorder.py",
                      "evalstop_ros/runner/adapters/ros2.py", "test/nodes", "test/launch"]
    # the console scripts that tests run in subprocesses import this tree, not wherever the venv's
    # editable install points (a venv shared by several worktrees); inside the ROS environment
    # PYTHONPATH already leads to this tree's build (tools/ros/env.sh)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(pathlib.Path(__file__).resolve().parent), *filter(None, [os.environ.get("PYTHONPATH")])])


# -- tiers: markers from where a test lives and what it needs (docs/testing.md) ----------------------
#: doctests of modules that import rclpy (left out above without the ROS environment)
_ROS_DOCTESTS = ("evalstop_ros/qos.py", "evalstop_ros/nodes/", "evalstop_ros/audit/recorder.py",
                 "evalstop_ros/runner/adapters/ros2.py")
#: every test here runs node executables or ``ros2 launch`` (left out above without the ROS environment)
_ROS_DIRS = ("test/nodes/", "test/launch/")
#: per-test timeout (pytest-timeout, a hang guard, not a speed goal) where the default of
#: pyproject.toml (300 s) is too short on a loaded machine: the ROS and network-namespace tests
#: wait for node processes with deadlines of their own of up to 400 s (test_demo); building
#: the separate openpi venv on first use (tools/openpi_venv.sh, up to 900 s) and the physics
#: sessions take longer still.
_ROS_TIMEOUT = 900
_LONG_TIMEOUTS = {"test/runner/test_openpi_compat.py": 1500, "test/nodes/test_robosuite_session.py": 1500,
                  # hubs and stations killed and restarted: a hub restart alone took minutes on a loaded machine
                  "test/hub/test_hub_two_processes.py": 1800, "test/hub/test_hub_ros_stations.py": 1800,
                  "test/hub/test_hub_stations.py": 1800,
                  # a Ray sim-eval session of about 20 robosuite rollouts, a worker killed and restarted
                  "test/parallel/test_sim_eval.py": 2400}


#: tests outside those directories that need the ROS build or rclpy without the ``ros_env`` fixture
_ROS_TESTS = {"test/audit/test_interfaces.py": ("test_definitions_hash_like_rosidl", "test_recorder_qos_equals_the_publishers")}
#: the Monte Carlo checks of a statistical claim (Type-I error, family-wise error, coverage,
#: power), by file and function: listed here rather than decorated, so that the tier stays in
#: one place (docs/testing.md); each is seeded and states its bound.
_MC_TESTS = {
    "test/session/test_parallel_validity.py": ("test_plan_order_keeps_the_level_and_completion_order_does_not",
                                               "test_sessions_on_four_runners_keep_the_family_wise_error"),
    "test/stats/test_adastop.py": ("test_fwe_five_agents_n5_k6", "test_fwe_spec_pitfall_p1_designs",
                                   "test_toy_examples_rejection_rates", "test_mujoco_decision_directions",
                                   "test_closed_fwe_under_partial_nulls_with_unequal_spreads",
                                   "test_relabel_fails_the_same_partial_null",
                                   "test_closed_fwe_under_global_nulls_with_heavy_tails",
                                   "test_closed_fwe_with_equal_means_and_one_tight_agent_among_wide_ones",
                                   "test_two_agents_with_spread_ratio_10_hold_only_with_the_bootstrap_test",
                                   "test_closed_fwe_with_skewed_scores_beside_a_steady_agent",
                                   "test_closed_fwe_with_u_shaped_progress_scores"),
    "test/stats/test_adastop_skew.py": ("test_hall_transform_removes_the_skewness_of_a_studentized_skewed_mean",
                                        "test_closed_fwe_with_exponential_like_scores_beside_a_steady_agent"),
    "test/hub/test_hub_family.py": ("test_familywise_error_of_six_equal_policies_is_controlled",
                                    "test_declared_family_keeps_the_familywise_error_under_the_global_null",
                                    "test_declared_family_keeps_the_familywise_error_when_the_warm_up_swaps_the_order",
                                    "test_declared_family_keeps_the_familywise_error_when_its_hedges_are_true_nulls"),
    "test/stats/test_families_run.py": ("test_fwe_four_policy_nscore_family", "test_fwe_four_policy_step_family",
                                        "test_iut_every_task_claim_keeps_its_level"),
    "test/stats/test_lai.py": ("test_type_one_error_monte_carlo",),
    "test/stats/test_mixture.py": ("test_type_one_error_bounded_scores_monte_carlo", "test_stops_sooner_than_nscore_on_a_hub_gap",
                                   "test_familywise_error_of_the_hubs_family_monte_carlo"),
    "test/stats/test_nscore.py": ("test_type_one_error_bernoulli_ties", "test_type_one_error_continuous_equal_means",
                                  "test_power_sanity_large_gap"),
    "test/stats/test_savi.py": ("test_type_one_error_worst_case_nulls",),
    "test/stats/test_wsr.py": ("test_type_one_error_worst_case_nulls",),
    "test/stats/test_batch.py": ("test_rerunning_a_batch_test_after_every_trial_inflates_type_one",),
    "test/stats/test_table1_reproduction.py": ("test_table1_bernoulli_within_monte_carlo_error",),
    "test/stats/test_ranking_pairs.py": ("test_familywise_error_on_the_worst_case_null",
                                         "test_stratified_run_order_holds_under_a_first_run_advantage"),
    "test/stats/test_ranking_coverage.py": ("test_intervals_cover_in_the_hard_world", "test_intervals_hold_at_other_levels",
                                            "test_the_small_sample_correction_is_what_holds_coverage_at_200",
                                            "test_the_skewness_correction_is_what_holds_prog_at_200",
                                            "test_prog_bootstrap_t_removes_halls_over_coverage",
                                            "test_elo_online_bootstrap_intervals_cover",
                                            "test_task_model_bootstrap_intervals_cover",
                                            "test_the_t_quantile_is_what_holds_the_task_model_at_few_refits",
                                            "test_paired_progress_survives_confounded_evaluators"),
    "test/active/test_validity.py": ("test_each_task_test_keeps_its_level",
                                     "test_any_claim_with_bonferroni_over_tasks_keeps_the_family_level",
                                     "test_pooled_test_loses_its_level_under_adaptive_task_choice"),
}
#: tests left to ``make test`` (``slow``; ``make check`` skips them) and not marked in their own
#: module: more than about 10 s on a 2-core machine (measured with --durations; docs/testing.md),
#: or a few seconds each where ``make check`` would pass 3 minutes with them
_SLOW_TESTS = {
    # one Ray sim-eval session of robosuite rollouts (minutes), shared by its three tests
    "test/parallel/test_sim_eval.py": ("test_every_task_is_decided_and_the_claim_established_with_fewer_rollouts",
                                       "test_a_killed_worker_is_a_fault_and_its_trial_runs_again",
                                       "test_the_journal_audits_verified_and_reports",
                                       "test_a_cancelled_rollout_releases_its_worker_at_once"),
    "test/cli/test_cli_rank.py": ("test_categories_with_operator_map",),
    # 3-8 s each: a hub process started twice; the figures in three formats; hubs on PostgreSQL
    "test/hub/test_hub_cli.py": ("test_the_hub_evaluates_as_it_was_started",),
    "test/report/test_report_figures.py": ("test_print_formats",),
    "test/hub/test_hub_family.py": ("test_hub_on_postgresql_settles_a_planted_ranking",
                                    "test_familywise_error_of_six_equal_policies_is_controlled",
                                    "test_declared_family_keeps_the_familywise_error_under_the_global_null",
                                    "test_declared_family_keeps_the_familywise_error_when_the_warm_up_swaps_the_order",
                                    "test_declared_family_keeps_the_familywise_error_when_its_hedges_are_true_nulls"),
    "test/hub/test_hub_two_processes.py": ("test_two_hubs_on_one_database_count_every_result_once_under_sigkill",),
    "test/hub/test_hub_stations.py": ("test_stations_survive_kills_and_every_result_counts_once",),
    "test/session/test_session_ab.py": ("test_rank_from_journal_and_bag_agree",),
    "test/report/test_report.py": ("test_cli_report",),
    # 4-6 s each: the task model fitted on simulated worlds (EM with restarts)
    "test/stats/test_ranking_task.py": ("test_task_model_recovers_planted_task_dependent_ranking_better",
                                        "test_task_model_does_not_overfit_without_task_effects"),
    "test/runner/test_robosuite_adapter.py": ("test_the_exact_grasp_lifts_the_cube_and_the_high_one_does_not",
                                              "test_the_drawn_grasp_errors_make_grasp_succeed_more_often_than_sloppy_"
                                              "and_repeat_per_rollout"),
    # 5-11 s: two STEP syntheses at N_max 100 and their exact Type-I checks
    "test/stats/test_step.py": ("test_synthesis_with_a_row_floor_keeps_the_exact_type1_below_alpha",),
}
#: tests without ROS whose wall-clock deadlines are sized for one test at a time and that failed
#: beside other workers under ``pytest -n auto`` on a loaded 2-core machine: run after the
#: parallel tier, one at a time (``serial``; docs/testing.md). The 50 Hz loop schedule is
#: asserted to 50 ms; the kill test's stations hold 3 s leases that a starved station loses;
#: Chromium renders the leaderboard of a live hub process within a virtual-time budget.
_SERIAL_TESTS = {
    "test/runner/test_episode.py": ("test_the_loop_keeps_its_rate",),
    "test/hub/test_hub_stations.py": ("test_stations_survive_kills_and_every_result_counts_once",),
    "test/hub/test_hub_two_processes.py": ("test_two_hubs_on_one_database_count_every_result_once_under_sigkill",),
    "test/hub/test_hub_leaderboard.py": ("test_leaderboard_page_in_headless_chromium",),
}

#: the ROS tests that ``make test`` runs under ROS 2 Jazzy too (``jazzy``; docs/testing.md, "Two
#: distributions"): those whose subject is what differs between the distributions, namely the built
#: interfaces, rclpy (contexts, logging, executor threads, parameters and their ranges, actions and
#: services), Fast DDS (lost responses re-sent, the graph's count of action servers, a command stream
#: over DDS), the message packages of the ros2 adapter, and launch, launch_testing and the ros2 CLI.
#: The session logic, the guards and the statistics above them are the same Python under both and
#: run under Kilted only; so do the checks of the repository's own files (package.xml, launch files'
#: syntax trees).
_JAZZY_TESTS = {
    "test/nodes/test_ros_package.py": ("test_interfaces_import", "test_decision_constants_match_the_stats_core",
                                       "test_installed_tree_has_package_data"),
    "test/nodes/test_ros_context.py": ("test_an_error_caused_by_ctrl_c_inside_rclpy_ends_the_context_quietly",
                                       "test_any_other_error_while_ros_is_up_propagates"),
    "test/nodes/test_quick_log.py": ("test_quick_logger_prints_what_rclpy_prints_with_the_callers_location",),
    "test/nodes/test_realtime.py": ("test_a_node_with_thread_priority_runs_all_its_threads_under_sched_fifo",),
    "test/nodes/test_evaluation_manager.py": ("test_pause_resume_undo_and_abort",
                                              "test_parameters_override_the_config_before_the_session_starts",
                                              "test_invalid_parameters_give_one_fatal_line_and_exit_2"),
    "test/nodes/test_sim_robot.py": ("test_a_goal_sent_again_gets_the_same_rollout", "test_parameter_change_is_checked",
                                     "test_ctrl_c_during_a_rollout_ends_quietly"),
    "test/nodes/test_lost_messages.py": ("test_lost_goal_responses_are_re_sent_and_change_nothing",),
    "test/nodes/test_one_runner.py": ("test_a_second_runner_on_the_action_pauses_the_session_with_a_warning",),
    "test/nodes/test_teleop_scorer.py": ("test_operator_scores_notes_and_undoes_from_the_terminal",),
    "test/nodes/test_ros2_adapter.py": ("test_observe_and_commands_as_joint_trajectories",
                                        "test_an_episode_drives_the_arm_through_float64_arrays_and_homes_it",
                                        "test_limits_come_from_the_robot_description_urdf"),
    "test/nodes/test_command_stream_ros2.py": ("test_no_command_of_a_random_runner_life_exceeds_a_limit_over_dds",),
    "test/launch/test_ros2_launch.py": ("test_eval_launch_sim_runs_a_session_that_audits_and_answers_the_ros2_cli",
                                        "test_ctrl_c_in_the_terminal_stops_the_launch_without_an_error_line",
                                        "test_eval_launch_sim_policy_runs_its_session_to_the_end_and_audits",
                                        "test_eval_launch_real_robot_waits_for_the_operator",
                                        "test_station_launch_runs_the_hubs_trials_and_exits",
                                        "test_launch_testing_test_of_the_demo_passes"),
}

#: the longest tests (wall time in a `make test` run, pytest-xdist workers beside two other runs):
#: under pytest-xdist they are handed out first, longest first, so that they do not start near
#: the end of a run and leave the other workers idle until they finish (xdist hands out the
#: tests in collection order). Only the order changes, and only under pytest-xdist.
_LONG_FIRST = {
    "test/parallel/test_sim_eval.py::test_every_task_is_decided_and_the_claim_established_with_fewer_rollouts": 300,
    "test/launch/test_ros2_launch.py::test_eval_launch_sim_policy_runs_its_session_to_the_end_and_audits": 80,
    "test/nodes/test_robosuite_session.py::test_a_physics_session_stops_for_the_competent_policy_and_audits_verified": 70,
    "test/runner/test_robosuite_adapter.py::test_the_drawn_grasp_errors_make_grasp_succeed_more_often_than_sloppy_"
    "and_repeat_per_rollout": 35,  # 5 rollouts, one camera rendered
    "test/cli/test_cli_examples.py::test_docs_examples_run": 80,
    "test/cli/test_cli_examples.py::test_help_examples_run": 75,
    "test/audit/test_record_e2e.py::test_recorded_ab_session_ranks_alike_from_journal_and_bag": 76,
    "test/hub/test_hub_ros_stations.py::test_ros_stations_survive_kills_and_every_result_counts_once": 60,
    "test/nodes/test_crash_recovery.py::test_manager_killed_at_each_phase_of_a_trial_loses_nothing": 35,
    "test/nodes/test_lost_messages.py::test_lost_goal_responses_are_re_sent_and_change_nothing": 52,
    "test/launch/test_ros2_launch.py::test_eval_launch_sim_runs_a_session_that_audits_and_answers_the_ros2_cli": 46,
    # the run without ROS (CPU-bound), which hands out whole modules (Makefile, XDIST): a module is
    # placed by its first test in this order, so the modules that take longest are listed too
    "test/session/test_parallel_validity.py::test_sessions_on_four_runners_keep_the_family_wise_error": 64,
    "test/hub/test_hub_netns.py::test_station_cut_off_past_its_lease_syncs_later": 44,
    "test/hub/test_hub_files.py::test_a_connection_string_is_never_printed": 33,
    "test/stats/test_adastop.py::test_fwe_five_agents_n5_k6": 30,
    "test/stats/test_table1_reproduction.py::test_table1_bernoulli_within_monte_carlo_error": 17,
    # and early, while the ROS runs keep the cores busy, the modules that mostly wait on real-time
    # loops (about 20 s each, a fifth of it CPU): at the end they would leave a core idle
    "test/runner/test_command_stream.py::test_no_command_of_a_random_runner_life_exceeds_a_limit": 25,
    "test/runner/test_episode.py::test_the_good_policy_succeeds_more_often_than_the_bad_one": 24,
}


def pytest_ignore_collect(collection_path: pathlib.Path, config: pytest.Config) -> bool | None:
    """Under ``-m serial`` exactly (``make test``'s last run, alone on the machine) only the modules of
    ``_SERIAL_TESTS`` are collected, the one place ``serial`` is set: collecting the whole tree to keep
    five tests took 10 to 14 CPU-s of that run's one process (3 so)."""
    if config.getoption("markexpr", "") != "serial" or collection_path.suffix != ".py":
        return None
    if collection_path.name == "conftest.py":
        return None
    root = pathlib.Path(str(config.rootpath))
    relative = collection_path.relative_to(root).as_posix() if collection_path.is_relative_to(root) else ""
    return None if relative in _SERIAL_TESTS else True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``ros`` every test that needs the ROS environment (its directory, a doctest of a
    module importing rclpy, or the ``ros_env`` fixture, which every node-starting fixture uses),
    ``netns`` every test that uses the ``netns`` fixture, ``mc``, ``slow``, ``serial`` and ``jazzy`` the
    tests listed above; give the long ones a longer timeout unless they set their own."""
    root = pathlib.Path(str(config.rootpath))
    for item in items:
        path = pathlib.Path(str(item.path)).relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        fixtures = getattr(item, "fixturenames", ())
        function = getattr(getattr(item, "function", None), "__name__", "")
        if (path.startswith(_ROS_DIRS) or path.startswith(_ROS_DOCTESTS) or "ros_env" in fixtures
                or function in _ROS_TESTS.get(path, ())):
            item.add_marker(pytest.mark.ros)
        if "netns" in fixtures:
            item.add_marker(pytest.mark.netns)
        if function in _MC_TESTS.get(path, ()):
            item.add_marker(pytest.mark.mc)
        if function in _SLOW_TESTS.get(path, ()):
            item.add_marker(pytest.mark.slow)
        if function in _SERIAL_TESTS.get(path, ()):
            item.add_marker(pytest.mark.serial)
        if function in _JAZZY_TESTS.get(path, ()):
            item.add_marker(pytest.mark.jazzy)
        if item.get_closest_marker("timeout") is None:
            node = f"{path}::{item.name.split('[')[0]}"
            seconds = _LONG_TIMEOUTS.get(node) or _LONG_TIMEOUTS.get(path)
            if seconds is None and any(item.get_closest_marker(m) for m in ("ros", "netns", "slow")):
                seconds = _ROS_TIMEOUT
            if seconds is not None:
                item.add_marker(pytest.mark.timeout(seconds))
    if os.environ.get("PYTEST_XDIST_WORKER"):  # every worker collects, and must sort alike
        items.sort(key=lambda item: -_LONG_FIRST.get(item.nodeid.split("[")[0], 0))
