"""Every phase of a command runs under its limits (--timeout: loading, parsing, type checking,
evaluating points, running, printing; --max-steps: every evaluation, points included), and
what grows exponentially -- types and values that share structure -- prints in bounded size,
abbreviated, saying so."""

import time

import pytest

import lambdad
from lambdad import cli

def powers(n: int) -> str:
    """Definitions p0 ... p{n-1}, each type the square of the one before: p_i's type has
    2^(2^i) leaves written out, shared in memory."""
    return "".join(["def p0 x = (x, x)\n"]
                   + [f"def p{i} x = p{i - 1} (p{i - 1} x)\n" for i in range(1, n)])


POWERS = powers(5)  # p4's type has 2^16 leaves: within the type checker's bound


def run_cli(capsys, *argv):
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def big_list_program(tmp_path, items: int):
    file = tmp_path / "big.lam"
    file.write_text("def main = [" + ", ".join(str(i) for i in range(items)) + "]\n"
                    "def f (x : R) : R = x * x\n")
    return str(file)


@pytest.mark.parametrize("command", [["run"], ["check-types"], ["grad", "f", "--at", "1"],
                                     ["check"]])
def test_the_time_limit_covers_parsing_and_type_checking(tmp_path, capsys, command):
    file = big_list_program(tmp_path, 100_000)
    started = time.monotonic()
    status, out, err = run_cli(capsys, command[0], file, *command[1:], "--timeout", "0.2")
    assert status == 1, (out, err)
    assert "time limit of 0.2 s" in err and out == ""
    assert time.monotonic() - started < 5


@pytest.mark.long
def test_a_million_element_list_stops_at_its_time_limit(tmp_path, capsys):
    file = big_list_program(tmp_path, 1_000_000)
    started = time.monotonic()
    status, _, err = run_cli(capsys, "run", file, "--timeout", "2")
    assert status == 1 and "time limit" in err
    assert time.monotonic() - started < 6


def test_the_step_limit_covers_the_evaluation_of_points(tmp_path, capsys):
    file = tmp_path / "f.lam"
    file.write_text("def f (x : R) : R = x * x\n")
    point = "fold (\\a i -> a + i) 0 (range 10000)"
    for command in (["grad", str(file), "f", "--at", point],
                    ["jvp", str(file), "f", "--at", point, "--dir", "1"],
                    ["check", str(file), "f", "--at", point]):
        status, out, err = run_cli(capsys, *command, "--max-steps", "100")
        assert status != 0 and "stopped after 100 steps" in err, (command, out, err)
        assert "ok" not in out


def test_exponentially_large_types_print_abbreviated(tmp_path, capsys):
    file = tmp_path / "powers.lam"
    file.write_text(POWERS)
    started = time.monotonic()
    status, out, err = run_cli(capsys, "check-types", str(file))
    assert status == 0, err
    assert time.monotonic() - started < 10
    lines = out.splitlines()
    assert lines[0] == "p0 : a -> a * a"
    assert len(out) < 20_000
    assert lines[-1].startswith("p4 : a -> (((") and lines[-1].endswith(
        "… [type abbreviated: it has 131073 parts]")


@pytest.mark.parametrize("count", [6, 40])
def test_a_type_beyond_the_type_checkers_bound_is_a_located_error(tmp_path, capsys, count):
    file = tmp_path / "powers.lam"
    file.write_text(powers(count))
    started = time.monotonic()
    status, out, err = run_cli(capsys, "check-types", str(file))
    assert time.monotonic() - started < 10
    assert status == 1 and out == ""
    first = err.splitlines()[0]
    assert first.startswith(f"{file}:6:12: type error: this expression's type is too large")
    assert "more than 1,000,000 parts" in first and len(err) < 2_000


def test_a_type_error_about_an_exponential_type_is_bounded(tmp_path, capsys):
    file = tmp_path / "powers.lam"
    file.write_text(POWERS + "def main = p4 1 + 1\n")
    status, out, err = run_cli(capsys, "run", str(file))
    assert status == 1 and "type error" in err and "type abbreviated" in err
    assert len(err) < 10_000


def test_an_exponentially_large_value_prints_abbreviated(tmp_path, capsys):
    file = tmp_path / "powers.lam"
    file.write_text(POWERS + "def main = p4 1\n")
    status, out, err = run_cli(capsys, "run", str(file))
    assert status == 0, err
    assert out.startswith("((((((") and out.rstrip().endswith("… [value abbreviated]")
    assert len(out) < 200_000


def test_small_types_and_values_print_in_full():
    program = lambdad.loads("def main = ([1, 2, 3], (true, 4))\ndef f x = (x, [x])")
    assert program.types() == [("main", "[R] * (Bool * R)"), ("f", "a -> a * [a]")]
    assert lambdad.values.format_value(program.run_raw()) == "([1, 2, 3], (true, 4))"


# ---------------------------------------------------------------- every limit in every route
# (issue 43: each finding of the adversarial run is a test here.)

import signal  # noqa: E402

from lambdad import limits  # noqa: E402

HUGE = 100_000_000  # `range HUGE` is 3.2 GB of reals: only a limit stops it in time
LOOPS = (f"def f (x : R) : R = fold (\\a i -> a + x * i) 0 (range {HUGE})\n"
         "def g (x : R) : R = fold (\\a i -> a + x * i) 0 (range 100000)\n"
         "def k (x : R) : R = fold (\\a i -> a + x * i) 0 (range 1000000)\n"
         f"def main = length (range {HUGE})\n")
LOOP_LINE = 1
RANGE_COLUMN = 49  # where `range` starts on f's line


@pytest.fixture
def loops(tmp_path):
    file = tmp_path / "loops.lam"
    file.write_text(LOOPS)
    return str(file)


def timed(capsys, *argv):
    started = time.monotonic()
    status, out, err = run_cli(capsys, *argv)
    return status, out, err, time.monotonic() - started


@pytest.mark.parametrize("command", [
    ["run"], ["grad", "f", "--at", "1"], ["grad", "f", "--at", "1", "--mode", "forward"],
    ["jvp", "f", "--at", "1", "--dir", "1"], ["hessian", "f", "--at", "1"],
    ["hvp", "f", "--at", "1", "--dir", "1"], ["jacobian", "f", "--at", "1"],
    ["trace", "f", "--at", "1"], ["graph", "f", "--at", "1"], ["check", "f", "--at", "1"],
    ["check", "f", "--at", "1", "--order", "2"]], ids=lambda c: "-".join(c[:1] + c[4:]))
def test_the_time_limit_stops_every_command_on_a_huge_range(loops, capsys, command):
    # Before: `range` built its list in one step, and every command overran to 7-10.7 s.
    status, out, err, elapsed = timed(capsys, command[0], loops, *command[1:],
                                      "--timeout", "0.5")
    assert status == 1 and out == "", err
    assert "resource error: stopped after the time limit of 0.5 s (--timeout)" in err
    assert elapsed < 2 * 0.5 + 1, elapsed


def test_the_time_limit_error_points_at_the_operation_running(loops, capsys):
    status, _, err = run_cli(capsys, "run", loops, "--timeout", "0.5")
    assert status == 1
    assert err.startswith(f"{loops}:4:20: resource error: stopped after the time limit")


def test_the_time_limit_stops_list_appends_and_zips(tmp_path, capsys):
    file = tmp_path / "lists.lam"
    file.write_text(f"def xs = range {HUGE // 4}\n"
                    "def main = length (concat [xs ++ xs, map fst (zip xs xs)])\n")
    status, _, err, elapsed = timed(capsys, "run", str(file), "--timeout", "0.5")
    assert status == 1 and "time limit" in err
    assert elapsed < 2, elapsed


def test_long_lists_are_built_right_in_pieces():
    program = lambdad.loads("def xs = range 200000\n"
                            "def main = (length (xs ++ xs), last (concat [xs, xs, [7]]), "
                            "fst (last (zip xs xs)), xs !! 131072)\n")
    assert lambdad.values.format_value(program.run_written()) == "(400000, 7, 199999, 131072)"


@pytest.mark.parametrize("command", [
    ["grad", "k", "--at", "1"], ["hessian", "k", "--at", "1"],
    ["hvp", "k", "--at", "1", "--dir", "1"], ["jacobian", "k", "--at", "1", "--mode", "reverse"],
    ["grad", "k", "--at", "1", "--strategy", "naive"]], ids=lambda c: "-".join(c[:1] + c[4:]))
def test_the_step_limit_bounds_reverse_and_nested_modes(loops, capsys, command):
    # Before: reverse mode gave every real of the list a zero adjoint, and nested modes a
    # zero tangent, uncounted: a fold over `range 1e8` ran 95 s, or was killed at ~80 s.
    status, out, err, elapsed = timed(capsys, command[0], loops, *command[1:],
                                      "--max-steps", "1000")
    assert status == 1 and out == "", err
    assert "resource error: stopped after 1000 steps" in err
    assert elapsed < 2, elapsed


@pytest.mark.parametrize("command", [
    ["run"], ["grad", "f", "--at", "1"], ["hessian", "f", "--at", "1"],
    ["hvp", "f", "--at", "1", "--dir", "1"], ["trace", "f", "--at", "1"],
    ["graph", "f", "--at", "1"], ["check", "f", "--at", "1"]], ids=lambda c: c[0])
def test_the_step_limit_stops_a_huge_range_before_it_is_made(loops, capsys, command):
    # Before: `grad` ran 95 s under --max-steps 1000, `hvp`/`hessian` were killed (memory).
    status, out, err, elapsed = timed(capsys, command[0], loops, *command[1:],
                                      "--max-steps", "1000")
    assert status == 1 and out == "", err
    line, column = (4, 20) if command == ["run"] else (LOOP_LINE, RANGE_COLUMN)
    assert err.startswith(f"{loops}:{line}:{column}: resource error: stopped after 1000 "
                          "steps"), err
    assert f"`range` would make a list of {HUGE} elements, a step each" in err
    assert elapsed < 1.5, elapsed


@pytest.mark.parametrize("command", [["trace"], ["trace", "--mode", "reverse"], ["graph"]])
def test_trace_and_graph_count_steps(loops, capsys, command):
    # Before: 40,003 rows printed under --max-steps 100.
    status, out, err = run_cli(capsys, command[0], loops, "g", "--at", "1", *command[1:],
                               "--max-steps", "100")
    assert status == 1 and out == "", out[:200]
    assert "resource error: stopped after 100 steps" in err


def test_trace_within_the_step_limit_prints_its_rows(tmp_path, capsys):
    file = tmp_path / "small.lam"
    file.write_text("def f (x : R) : R = x * x + 1\n")
    status, out, err = run_cli(capsys, "trace", str(file), "f", "--at", "3",
                               "--max-steps", "10")
    assert status == 0, err
    assert "10" in out and "*" in out


@pytest.mark.parametrize("flag,limit", [("--max-steps", "100"), ("--timeout", "0.5")])
@pytest.mark.parametrize("where", ["--at", "--dir"])
def test_a_limit_hit_reading_a_point_is_a_resource_error(loops, capsys, flag, limit, where):
    # Before: reported as a usage error (exit 2).
    point = (f"length (range {HUGE})" if flag == "--timeout"
             else "fold (\\a i -> a + i) 0 (range 10000)")
    at, direction = (point, "1") if where == "--at" else ("1", point)
    status, out, err, elapsed = timed(capsys, "jvp", loops, "f", "--at", at, "--dir", direction,
                                      flag, limit)
    assert status == 1 and out == "", err
    assert err.startswith(f"{where}:1:") and "resource error: stopped after" in err, err
    assert "usage error" not in err
    assert elapsed < 2, elapsed


def memory_limit_above_now(extra: int) -> str:
    return str(limits.resident_bytes() + extra)


@pytest.mark.parametrize("command", [["run"], ["grad", "f", "--at", "1"],
                                     ["hvp", "f", "--at", "1", "--dir", "1"]])
def test_the_memory_limit_stops_a_run_with_a_located_error(loops, capsys, command):
    # Before: hvp and hessian of a fold over `range 1e8` were killed by the kernel.
    status, out, err, elapsed = timed(capsys, command[0], loops, *command[1:],
                                      "--max-memory", memory_limit_above_now(100 << 20))
    assert status == 1 and out == "", err
    first = err.splitlines()[0]
    assert "resource error: stopped at the memory limit of" in first, err
    assert "(--max-memory): the run uses" in first
    line, column = (4, 20) if command == ["run"] else (LOOP_LINE, RANGE_COLUMN)
    assert first.startswith(f"{loops}:{line}:{column}:"), first
    assert elapsed < 5, elapsed


def test_the_default_memory_limit_is_half_the_machines_memory():
    total = limits._physical_memory()
    assert total is not None and total > 0
    assert limits.default_max_memory() == total // 2
    args = cli.build_parser().parse_args(["run", "x.lam"])
    assert cli._memory_limit(args) == total // 2
    args = cli.build_parser().parse_args(["run", "x.lam", "--max-memory", "1.5G"])
    assert cli._memory_limit(args) == 3 << 29


@pytest.mark.parametrize("text,size", [("500M", 500 << 20), ("2g", 2 << 30), ("1.5GB", 3 << 29),
                                       ("4096", 4096), ("64KiB", 64 << 10)])
def test_memory_sizes_are_read_in_bytes_kilo_mega_giga(text, size):
    assert limits.parse_bytes(text) == size


@pytest.mark.parametrize("text", ["0", "lots", "-1G", "1X", ""])
def test_a_bad_memory_size_is_a_usage_error(tmp_path, capsys, text):
    status, out, err = run_cli(capsys, "run", str(tmp_path / "x.lam"), "--max-memory", text)
    assert status == 2 and out == ""
    assert "--max-memory" in err and "usage error" in err


def test_fuzz_takes_a_time_limit_for_the_whole_run(capsys):
    # Before: `fuzz` had no --timeout.
    status, out, err, elapsed = timed(capsys, "fuzz", "--programs", "100000", "--jobs", "1",
                                      "--timeout", "0.5")
    assert status == 1 and "ok" not in out and "FAILED" not in out
    assert err.strip().endswith("resource error: stopped after the time limit of 0.5 s "
                                "(--timeout)"), err
    assert elapsed < 2 * 0.5 + 1, elapsed


def test_fuzz_within_its_time_limit_reports_as_usual(capsys):
    status, out, err = run_cli(capsys, "fuzz", "--programs", "3", "--jobs", "1",
                               "--timeout", "60")
    assert status == 0 and out.startswith("ok: 3 random program(s)"), err


def alarm_state():
    return signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)


def test_the_watch_leaves_signal_handler_and_timer_as_it_found_them(loops, capsys):
    before = alarm_state()
    assert before[1] == (0.0, 0.0)
    status, _, err = run_cli(capsys, "run", loops, "--timeout", "0.3")
    assert status == 1 and "time limit" in err
    assert alarm_state() == before
    status, _, err = run_cli(capsys, "grad", loops, "g", "--at", "1")
    assert status == 0, err
    assert alarm_state() == before


def test_a_timer_armed_before_goes_on_after_the_watch(loops, capsys):
    fired = []

    def own(signum, frame):
        fired.append(signum)

    previous = signal.signal(signal.SIGALRM, own)
    try:
        signal.setitimer(signal.ITIMER_REAL, 30.0)
        status, _, err = run_cli(capsys, "run", loops, "--timeout", "0.3")
        assert status == 1 and "time limit" in err
        assert signal.getsignal(signal.SIGALRM) is own
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 25 < remaining < 30
        signal.setitimer(signal.ITIMER_REAL, 0.01)
        time.sleep(0.2)
        assert fired == [signal.SIGALRM]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_the_watch_is_undone_after_an_interrupt():
    before = alarm_state()
    with pytest.raises(KeyboardInterrupt):
        with limits.watching(5.0, 1 << 40):
            assert signal.getitimer(signal.ITIMER_REAL)[0] > 0
            raise KeyboardInterrupt
    assert alarm_state() == before


def test_the_watch_stops_python_code_once_with_the_error_it_raised():
    started = time.monotonic()
    with pytest.raises(limits.Stopped, match=r"time limit of 0.2 s \(--timeout\)"):
        with limits.watching(0.2):
            while True:
                pass
    assert time.monotonic() - started < 1.5


def test_the_memory_limit_holds_in_the_worker_processes_of_check(loops, capsys):
    # The workers of `check --jobs 2` are forked: they watch the command's limits too.
    status, out, err, elapsed = timed(capsys, "check", loops, "f", "--samples", "2",
                                      "--jobs", "2",
                                      "--max-memory", memory_limit_above_now(100 << 20))
    assert status == 1, (out, err)
    assert "resource error: stopped at the memory limit of" in err
    assert err.startswith(f"{loops}:{LOOP_LINE}:{RANGE_COLUMN}:"), err
    assert elapsed < 10, elapsed


def test_the_watch_serves_the_api_too():
    program = lambdad.loads(LOOPS)
    before = alarm_state()
    started = time.monotonic()
    with pytest.raises(lambdad.limits.Stopped) as stopped:
        with lambdad.limits.watching(timeout=0.3):
            program.grad("f", 1.0)
    assert time.monotonic() - started < 2
    assert stopped.value.span is not None and stopped.value.span.line == LOOP_LINE
    assert isinstance(stopped.value, lambdad.ResourceError)
    assert alarm_state() == before
    assert program.grad("g", 1.0) == 99999 * 100000 / 2  # the program runs on as before


def test_an_error_raised_because_the_watch_stopped_the_run_reports_the_limit():
    # Code interrupted by the watch may fail in its own way (a library's state half
    # changed): what is reported is the limit.
    with pytest.raises(limits.Stopped, match="time limit of 0.2 s"):
        with limits.watching(0.2):
            try:
                while True:
                    pass
            except limits.Stopped:
                assert limits.stopped() is not None
                raise AssertionError("a library's state, half changed") from None
    assert limits.stopped() is None
