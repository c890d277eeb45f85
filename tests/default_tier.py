"""Choose the default tier of the test suite; the other tests are listed in
``tests/extended.txt`` (marked ``extended``: CI runs them after the default tier,
``python -m pytest -q -m extended``). The default tier holds the tests the issues ask of
the default suite (:data:`PINNED`) and those of at most ``--quick`` seconds, then the tests
that cover the most lines of ``jaxmbd/`` not yet covered per second (greedy, the weighted
set cover's usual approximation) while ``--budget`` summed seconds last, then the cheapest
others while they last.

Inputs: a coverage run of the whole suite (both tiers, ``-m 'not slow'``) with a context
per test (``pytest-cov``), and suite profiles (``JAXMBD_SUITE_PROFILE=FOLDER``, from an
empty compilation cache) of the whole suite and of earlier default tiers:

    COVERAGE_FILE=COV python -m pytest -q -m 'not slow' --cov=jaxmbd --cov-context=test \\
        --cov-report=
    JAXMBD_SUITE_PROFILE=PROFILE python -m pytest -q -m 'not slow'
    python tests/default_tier.py COV PROFILE [PROFILE ...] [--budget 1050] [--write]

A test's seconds depend on the order: one that reuses programs another test compiled (a
module fixture, a parameter that compiled first) is cheap beside it and dear alone, so the
seconds taken are the most of any profile (see :func:`test_seconds`); profiling the chosen
tier and choosing again with that profile added corrects what the first choice missed.
2 workers finish about 1100 summed seconds in 10 minutes.
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

from suite_profile import profile_rows

HERE = Path(__file__).resolve().parent
EXTENDED = HERE / "extended.txt"

#: Tests the issues ask of the default suite (node-id prefixes), kept in the default tier
#: whatever their cost.
PINNED = {
    # 56: a short exact-contact gradient; 78: joint-coordinate gradients through compliant
    # and hard contact, hard-contact physics against a closed form
    "tests/test_hard_contact.py::test_gradient_through_one_impact": "56",
    "tests/test_contact_joint.py::test_gradient_through_compliant_contact_equals_central_dif": "78",
    "tests/test_joint_hard_contact.py::test_gradient_through_the_impact_equals_central_di": "78",
    "tests/test_joint_hard_contact.py::test_drop_rebounds_and_rests_as_the_closed_forms": "78",
    # 56: a cross-process gradient in the default distributed launch
    "tests/test_distributed.py::test_two_processes_equal_one": "56",
    # 73: rows, solve and collisions against mj_forward / mj_collision; 20 steps of four
    # files against mj_step; the gradient cases
    "tests/test_soft_constraints.py::test_accelerations_and_forces_equal_mj_forward": "73",
    "tests/test_soft_constraints.py::test_twenty_steps_equal_mj_step": "73",
    "tests/test_soft_rows.py::test_robot_rows_": "73",
    "tests/test_mujoco_collision.py::test_standard_models_contacts": "73",
    "tests/test_soft_gradients.py::test_box_slides_to_rest_gradients": "73",
    "tests/test_soft_gradients.py::test_ball_bounce_gradients": "73",
    # 73: the solver on the active rows in blocks, more than one block of them
    "tests/test_soft_solver.py::test_active_rows_capacity_gives_the_solve_on_all_rows": "73",
    # 75: the program's size against the chain's length, compiles counted for new values
    "tests/test_tree_scaling.py::test_run_program_does_not_grow_with_the_chain": "75",
    "tests/test_plain_call.py::test_new_parameter_values_compile_nothing": "75",
    "tests/test_envs.py::test_domain_randomization_over_a_batch_of_models": "75",
    # 76: rewards against MuJoCo C, the env path's input checks, the humanoid's and the
    # quadruped's observations and rewards
    "tests/test_envs_mujoco.py::test_rewards_equal_mujoco_c_from_the_same_draws": "76",
    "tests/test_envs_mujoco.py::test_negative_friction_through_env_sys_is_refused": "76",
    "tests/test_envs_mujoco.py::test_invalid_members_of_a_randomised_batch": "76",
    "tests/test_envs_mujoco.py::test_a_time_step_the_integrator_cannot_take": "76",
    "tests/test_envs_mujoco.py::test_nan_actions_are_zeroed_counted": "76",
    "tests/test_envs_mujoco.py::test_humanoid_sizes_observation_and_reward": "76",
    "tests/test_envs_mujoco.py::test_quadruped_sizes_observation_and_reward": "76",
    # the README's first command, and its Python example
    "tests/test_cli.py::test_kinematics_command": "README",
    "tests/test_docs.py::test_readme_example": "README",
}


def pinned(test: str) -> bool:
    return any(test.startswith(prefix) for prefix in PINNED)


def test_seconds(folders: list[Path]) -> dict[str, float]:
    """Each test's seconds: the most it took in any of the profiles (a test reusing
    programs that another test compiled is cheap in one order, not in another), and for a
    parametrised test seen only beside its dearer parameters, the dearest of them (a module
    fixture that another parameter paid for)."""
    seconds = collections.defaultdict(float)
    seen = collections.defaultdict(set)
    for k, folder in enumerate(folders):
        for row in profile_rows(folder):
            seconds[row["test"]] = max(seconds[row["test"]], row["wall"])
            seen[row["test"]].add(k)
    groups = collections.defaultdict(list)
    for test in seconds:
        groups[test.split("[", 1)[0]].append(test)
    for members in groups.values():
        dearest = max(seconds[t] for t in members)
        for test in members:
            if len(seen[test]) == 1 and seconds[test] < 1.0 and dearest > 5.0:
                seconds[test] = dearest
    return dict(seconds)


def test_lines(coverage_file: Path) -> dict[str, set]:
    """Each test's covered lines of ``jaxmbd/`` as (file, line) pairs, its setup, call and
    teardown together."""
    from coverage import CoverageData

    data = CoverageData(basename=str(coverage_file))
    data.read()
    lines = collections.defaultdict(set)
    for path in data.measured_files():
        name = path.split("/jaxmbd/", 1)[-1]
        for line, contexts in data.contexts_by_lineno(path).items():
            for context in contexts:
                if context:
                    lines[context.rsplit("|", 1)[0]].add((name, line))
    return lines


def choose(seconds: dict[str, float], lines: dict[str, set], budget: float, quick: float):
    """(default tier, extended tier, the default tier's seconds, the lines only the
    extended tier covers): the pinned tests and those of at most ``quick`` seconds, the
    greedy cover of the other covered lines while the budget lasts, then the cheapest
    other tests while it lasts."""
    tests = sorted(seconds)
    uncovered = set().union(*(lines.get(t, set()) for t in tests))
    for test in set(lines) - set(seconds):  # unprofiled: in the default tier
        uncovered -= lines[test]
    chosen = [t for t in tests if pinned(t) or seconds[t] <= quick]
    spent = sum(seconds[t] for t in chosen)
    remaining = set(tests) - set(chosen)
    for test in chosen:
        uncovered -= lines.get(test, set())
    candidates = set(remaining)
    while uncovered and candidates:
        best = max(
            candidates,
            key=lambda t: (len(lines.get(t, set()) & uncovered) / max(seconds[t], 0.05), t),
        )
        gain = lines.get(best, set()) & uncovered
        if not gain:
            break
        candidates.discard(best)
        if spent + seconds[best] > budget:  # too long for what is left: the next best
            continue
        chosen.append(best)
        remaining.discard(best)
        spent += seconds[best]
        uncovered -= gain
    for test in sorted(remaining, key=lambda t: (seconds[t], t)):
        if spent + seconds[test] > budget:
            break
        chosen.append(test)
        remaining.discard(test)
        spent += seconds[test]
    return sorted(chosen), sorted(remaining), spent, uncovered


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("coverage", type=Path)
    parser.add_argument("profiles", type=Path, nargs="+", help="suite profile folders")
    parser.add_argument("--budget", type=float, default=1050.0, help="summed test seconds")
    parser.add_argument("--write", action="store_true", help=f"write {EXTENDED.name}")
    parser.add_argument("--quick", type=float, default=0.5, help="seconds: always default")
    parser.add_argument("--files", type=int, default=15, help="files of uncovered lines listed")
    args = parser.parse_args()
    seconds = test_seconds(args.profiles)
    lines = test_lines(args.coverage)
    missing = sorted(set(lines) - set(seconds))
    if missing:
        print(f"{len(missing)} covered tests have no profiled seconds (kept in the default tier)")
    chosen, extended, spent, uncovered = choose(seconds, lines, args.budget, args.quick)
    total = sum(seconds.values())
    covered = len(set().union(*lines.values()))
    print(
        f"default tier: {len(chosen)} tests, {spent:.0f} s of {total:.0f}; "
        f"extended: {len(extended)} tests, {total - spent:.0f} s; lines of jaxmbd/ covered "
        f"by the whole suite: {covered}, by the extended tier alone: {len(uncovered)}"
    )
    by_file = collections.Counter(name for name, _ in uncovered)
    for name, count in by_file.most_common(args.files):
        print(f"  {count:5d} {name}")
    if args.write:
        header = (
            "# Tests of the extended tier (marked `extended`, CI runs them after the default\n"
            f"# tier), chosen by tests/default_tier.py (--budget {args.budget:g} --quick "
            f"{args.quick:g});\n"
            "# regenerate with `python tests/default_tier.py COV PROFILE ... --write`.\n"
        )
        EXTENDED.write_text(header + "".join(f"{t}\n" for t in extended))


if __name__ == "__main__":
    main()
