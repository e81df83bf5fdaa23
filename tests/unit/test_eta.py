"""The run's ETA (hvbench.run.eta) on a fake clock: known from the first instant, falls
while an item runs, corrects itself by how far finished items were off, follows added
adaptive rounds; and the single-run progress line keeps its width."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from hvbench.cli.run import next_commands, run_command, run_progress
from hvbench.run.eta import RunEta, clock_text, item_estimates
from hvbench.run.plan import BOOT_ESTIMATE_S, groups, plan_study, platform_boots
from hvbench.run.runner import load_study

EXAMPLES = Path(__file__).parents[2] / "examples"


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_eta_is_the_plan_before_anything_finished() -> None:
    clock = FakeClock()
    eta = RunEta([10.0, 20.0, 30.0], clock)
    assert eta.remaining_s() == 60.0


def test_the_eta_falls_while_an_item_runs_and_never_counts_it_below_zero() -> None:
    clock = FakeClock()
    eta = RunEta([10.0, 20.0], clock)
    clock.now += 4
    assert eta.remaining_s() == 26.0
    clock.now += 100  # the first item overran its estimate: only the rest is left
    assert eta.remaining_s() == 20.0


def test_finished_items_scale_what_is_left() -> None:
    clock = FakeClock()
    eta = RunEta([10.0, 10.0, 10.0], clock)
    clock.now += 20  # twice as slow as planned
    eta.item_done()
    assert eta.scale() == 2.0
    assert eta.remaining_s() == 40.0
    clock.now += 5
    assert eta.remaining_s() == 35.0
    clock.now += 15
    eta.item_done()
    clock.now += 20
    eta.item_done()
    assert eta.remaining_s() == 0.0


def test_adaptive_rounds_add_items_at_the_median_estimate() -> None:
    clock = FakeClock()
    eta = RunEta([2.0, 4.0, 9.0], clock)
    eta.set_total(5)
    assert eta.remaining_s() == 2.0 + 4.0 + 9.0 + 2 * 4.0


def test_item_estimates_add_a_boot_to_each_group_the_runner_boots() -> None:
    plan = plan_study(load_study(EXAMPLES / "quick.toml"))
    estimates = item_estimates(plan)
    assert len(estimates) == len(plan.items)
    boots = sum(platform_boots(g) for g in groups(plan.items))
    assert boots > 0
    assert abs(sum(estimates) - plan.estimate_s) < 1e-6
    cells = sum(plan.cell_seconds[i.cell.name] for i in plan.items)
    assert abs(sum(estimates) - cells - boots * BOOT_ESTIMATE_S) < 1e-6


def test_clock_text_keeps_its_width() -> None:
    assert clock_text(0) == "0:00:00"
    assert clock_text(3725.4) == "1:02:05"
    assert clock_text(-3) == "0:00:00"


def _line(description: str, clock: FakeClock, eta: RunEta) -> str:
    console = Console(file=io.StringIO(), width=120, color_system=None)
    progress = run_progress(console, eta)
    progress.add_task(description, total=3)
    console.print(progress.make_tasks_table(progress.tasks))
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue().rstrip()


def test_the_progress_line_shows_the_eta_and_total_at_once_and_keeps_its_columns() -> None:
    clock = FakeClock()
    eta = RunEta([60.0, 60.0, 61.0], clock)
    short = _line("a", clock, eta)
    long = _line("vm-virtio-blk/fio-randread (rep 2): booting", clock, eta)
    assert "0/3" in short and "ETA 0:03:01" in short
    assert "?" not in short
    # The description is last: everything before it is the same whatever its length.
    assert short[:short.index(" a")] == long[:long.index(" vm-")]


def test_the_commands_a_run_prints_name_its_database_and_id() -> None:
    assert run_command(["run", "--resume", "r 1"], "/tmp/x y.db") == \
        "hvbench run --resume 'r 1' --db '/tmp/x y.db'"
    assert next_commands("20261126-230000-abcd", ".make/demo.db") == [
        "  report:  hvbench report 20261126-230000-abcd --db .make/demo.db",
        "  explain: hvbench explain 20261126-230000-abcd --db .make/demo.db",
        "  HTML:    hvbench report 20261126-230000-abcd --format html -o "
        "20261126-230000-abcd.html --db .make/demo.db"]


def test_a_quiet_run_shows_no_bar() -> None:
    console = Console(file=io.StringIO(), width=120, force_terminal=True)
    with run_progress(console, RunEta([1.0]), quiet=True) as progress:
        progress.add_task("x", total=1)
    file = console.file
    assert isinstance(file, io.StringIO)
    assert file.getvalue() == ""


def test_the_printed_commands_run_as_typed_from_an_unactivated_venv() -> None:
    """`make demo` runs .venv/bin/hvbench without activating the venv: the commands it
    prints start with that path unless hvbench is on PATH."""
    from hvbench.cli.common import invoked_program

    assert invoked_program(".venv/bin/hvbench", on_path=False) == ".venv/bin/hvbench"
    assert invoked_program(".venv/bin/hvbench", on_path=True) == "hvbench"
    assert invoked_program("hvbench", on_path=False) == "hvbench"  # found on PATH
    assert invoked_program("/x/hvbench/cli/main.py", on_path=False) == "hvbench"
    assert next_commands("r1", "d.db", ".venv/bin/hvbench")[0] == \
        "  report:  .venv/bin/hvbench report r1 --db d.db"
