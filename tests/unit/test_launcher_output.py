"""How bpslaunch copies its children's output: segments cut at \\n and \\r, each prefixed; hidden workers' output
dropped except the tail of stderr of one that fails. Byte streams stand in for the children's pipes."""

import io
import os
import sys
import textwrap
import threading
import types

import pytest

from bps_tf.launcher import output as output_module
from bps_tf.launcher.arguments import parse_arguments
from bps_tf.launcher.cluster import run_worker_command
from bps_tf.launcher.main import main
from bps_tf.launcher.output import (
    HIDDEN_TAIL_LINES,
    PrefixedOutput,
    SegmentSplitter,
    is_shown,
    parse_output_ranks,
    worker_rank,
)


class FakeProcess:
    """What PrefixedOutput uses of a subprocess.Popen: two binary pipes, poll() and wait()."""

    def __init__(self, stdout=b"", stderr=b"", returncode=0):
        self.stdout = io.BytesIO(stdout)
        self.stderr = io.BytesIO(stderr)
        self.returncode = returncode
        self.running = False

    def poll(self):
        return None if self.running else self.returncode

    def wait(self):
        return self.returncode


def copied(label, process, shown=True):
    """(stdout text, stderr text) after PrefixedOutput copied `process` to its end."""
    stdout, stderr = io.StringIO(), io.StringIO()
    output = PrefixedOutput(stdout, stderr)
    output.follow(label, process, shown)
    output.wait_until_drained(5)
    return stdout.getvalue(), stderr.getvalue()


def split(*chunks, max_bytes=1 << 16):
    """The segments a SegmentSplitter makes of `chunks`, fed one by one, then finished."""
    splitter = SegmentSplitter(max_bytes)
    segments = []
    for chunk in chunks:
        segments += splitter.feed(chunk)
    return segments + splitter.finish()


class TestSegments:
    def test_lines_keep_their_newlines(self):
        assert split(b"one\ntwo\n") == ["one\n", "two\n"]

    def test_each_progress_redraw_is_a_segment(self):
        # How Keras draws: each update starts with \r, the last ends with \n.
        stream = b"Epoch 1/2\n\r1/3 [=>..]\r2/3 [==>.]\r3/3 [===]\n"
        assert split(stream) == ["Epoch 1/2\n", "1/3 [=>..]\r", "2/3 [==>.]\r", "3/3 [===]\n"]

    def test_crlf_ends_one_line_without_an_empty_one(self):
        assert split(b"a\r\nb\r\n\r\n") == ["a\n", "b\n", "\n"]

    def test_crlf_split_between_two_reads(self):
        assert split(b"a\r", b"\nb\r", b"c\n") == ["a\n", "b\r", "c\n"]

    def test_empty_lines_are_kept_but_empty_redraws_dropped(self):
        assert split(b"\n\n\r\rx\n") == ["\n", "\n", "x\n"]

    def test_partial_reads_make_whole_segments(self):
        stream = b"first line\r progress \r\nlast\n"
        assert split(*[stream[i:i + 1] for i in range(len(stream))]) == split(stream)

    @pytest.mark.parametrize("ending", [b"", b"\r"])
    def test_stream_without_final_newline_ends_with_one(self, ending):
        assert split(b"line\nno newline" + ending) == ["line\n", "no newline\n"]

    def test_long_lines_are_cut(self):
        assert split(b"abcdefghij\n", max_bytes=4) == ["abcd\n", "efgh\n", "ij\n"]
        assert split(b"abcd", b"efgh", b"\n", max_bytes=4) == ["abcd\n", "efgh\n"]
        assert split(b"abcd\r", b"\n", max_bytes=4) == ["abcd\n"]

    def test_cuts_never_split_a_character(self):
        assert split("abcé€".encode(), max_bytes=4) == ["abc\n", "é\n", "€\n"]

    def test_binary_garbage_is_replaced(self):
        assert split(b"\xff\xfe ok\n\x80") == ["\ufffd\ufffd ok\n", "\ufffd\n"]


class TestPrefixedOutput:
    def test_every_segment_is_prefixed(self):
        process = FakeProcess(stdout=b"Epoch 1/2\n\r1/3 [=>..]\r\n3/3 [===]", stderr=b"warn\r\n")
        assert copied("worker 0", process) == (
            "[worker 0] Epoch 1/2\n[worker 0] 1/3 [=>..]\n[worker 0] 3/3 [===]\n", "[worker 0] warn\n")

    def test_progress_redraws_keep_their_carriage_returns(self):
        out, _ = copied("worker 1", FakeProcess(stdout=b"\r1/2\r2/2\n"))
        assert out == "[worker 1] 1/2\r[worker 1] 2/2\n"

    def test_reads_a_real_pipe_as_it_is_written(self):
        read_end, write_end = os.pipe()
        process = FakeProcess()
        process.stdout = open(read_end, "rb")
        stdout = io.StringIO()
        output = PrefixedOutput(stdout, io.StringIO())
        output.follow("worker 0", process)
        with open(write_end, "wb", buffering=0) as pipe:
            for step in range(3):
                pipe.write(f"\rstep {step}".encode())
        output.wait_until_drained(5)
        assert stdout.getvalue() == "[worker 0] step 0\r[worker 0] step 1\r[worker 0] step 2\n"

    def test_long_lines_are_cut_at_the_bound(self):
        line = b"x" * (output_module._MAX_LINE_BYTES + 10)
        out, _ = copied("server 0", FakeProcess(stdout=line + b"\n"))
        assert out.splitlines() == ["[server 0] " + "x" * output_module._MAX_LINE_BYTES, "[server 0] " + "x" * 10]

    def test_processes_never_mix_within_a_segment(self):
        stdout = io.StringIO()
        output = PrefixedOutput(stdout, io.StringIO())
        for rank in range(4):
            output.follow(f"worker {rank}", FakeProcess(stdout=(f"\r{rank}" * 500 + "\n").encode() * 50))
        output.wait_until_drained(10)
        segments = stdout.getvalue().replace("\r", "\n").splitlines()
        assert len(segments) == 4 * 50 * 500
        assert all(segment in {f"[worker {rank}] {rank}" for rank in range(4)} for segment in segments)


class TestHiddenWorkers:
    def test_output_of_a_hidden_worker_that_succeeds_is_dropped(self):
        assert copied("worker 1", FakeProcess(stdout=b"out\n", stderr=b"err\n"), shown=False) == ("", "")

    def test_tail_of_stderr_is_shown_when_a_hidden_worker_fails(self):
        stderr = b"".join(b"log %d\n" % number for number in range(100)) + b"Traceback\r\nValueError: bad"
        out, err = copied("worker 2", FakeProcess(stdout=b"out\n", stderr=stderr, returncode=3), shown=False)
        assert out == ""
        lines = err.splitlines()
        assert lines[0] == (f"bpslaunch: worker 2 exited with code 3; its output was hidden, the last "
                            f"{HIDDEN_TAIL_LINES} lines of its stderr:")
        assert lines[1:] == ([f"[worker 2] log {number}" for number in range(100 - HIDDEN_TAIL_LINES + 2, 100)]
                             + ["[worker 2] Traceback", "[worker 2] ValueError: bad"])

    def test_progress_redraws_do_not_push_errors_out_of_the_tail(self):
        stderr = b"error context\n" + b"".join(b"\r%d%%" % percent for percent in range(101)) + b"\nfailed\n"
        _, err = copied("worker 0", FakeProcess(stderr=stderr, returncode=-11), shown=False)
        assert err.splitlines() == [
            "bpslaunch: worker 0 was killed by SIGSEGV; its output was hidden, the last 3 lines of its stderr:",
            "[worker 0] error context", "[worker 0] 100%", "[worker 0] failed"]

    def test_hidden_worker_that_the_launcher_stops_shows_nothing(self):
        release = threading.Event()

        class StoppedProcess(FakeProcess):
            def wait(self):
                release.wait(5)
                return -15

        process = StoppedProcess(stderr=b"Terminated\n")
        process.running = True
        stderr = io.StringIO()
        output = PrefixedOutput(io.StringIO(), stderr)
        output.follow("worker 1", process, shown=False)
        output.stopping([process])
        release.set()
        output.wait_until_drained(5)
        assert stderr.getvalue() == ""

    def test_launcher_messages_are_always_shown(self):
        stderr = io.StringIO()
        PrefixedOutput(io.StringIO(), stderr).report("worker 1 exited with code 3")
        assert stderr.getvalue() == "bpslaunch: worker 1 exited with code 3\n"


class TestOutputRanks:
    @pytest.mark.parametrize("text, ranks", [("0", {0}), ("0,2", {0, 2}), (" 3 , 1 ", {1, 3}), ("1,1", {1})])
    def test_valid_lists(self, text, ranks):
        assert parse_output_ranks(text) == ranks

    @pytest.mark.parametrize("text", ["", "-1", "a", "0,", "1.5", "0;2", "+1"])
    def test_invalid_lists_say_what_is_expected(self, text):
        with pytest.raises(ValueError, match="non-negative integers separated by commas"):
            parse_output_ranks(text)

    def test_ranks_count_machine_by_machine(self):
        assert [worker_rank(machine, local_rank, 2) for machine in range(2) for local_rank in range(2)] == [0, 1, 2, 3]
        assert is_shown(3, None) and is_shown(3, {3}) and not is_shown(2, {3})


class TestOutputRanksArguments:
    @pytest.fixture(autouse=True)
    def no_ranks_in_the_environment(self, monkeypatch):
        monkeypatch.delenv("BYTEPS_OUTPUT_RANKS", raising=False)

    @pytest.mark.parametrize("argv, message", [
        (["--local", "--output-ranks", "x", "--", "true"],
         "argument --output-ranks: expected worker ranks as non-negative integers separated by commas"),
        (["--local", "--output-ranks=-1", "--", "true"], "argument --output-ranks: expected worker ranks"),
        (["--local", "--output-ranks", "", "--", "true"], "argument --output-ranks: expected worker ranks"),
        (["--local", "--workers", "2", "--output-ranks", "1,2,5", "--", "true"],
         "--output-ranks: no worker has rank 2, 5; this job has ranks 0..1"),
        (["--output-ranks", "zero", "python", "train.py"], "argument --output-ranks: expected worker ranks"),
    ])
    def test_bad_ranks_are_usage_errors(self, argv, message, capsys):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err

    def test_ranks_count_every_process_of_every_machine(self):
        args = parse_arguments(["--local", "--workers", "2", "--local-size", "4", "--output-ranks", "0,7", "--",
                                "python", "train.py"])
        assert args.output_ranks == {0, 7}
        assert parse_arguments(["--local", "--", "true"]).output_ranks is None

    def test_cluster_mode_takes_the_option_too(self):
        assert parse_arguments(["--output-ranks", "3", "python", "train.py"]).output_ranks == {3}

    def test_environment_variable_is_the_default(self, monkeypatch):
        monkeypatch.setenv("BYTEPS_OUTPUT_RANKS", "1,2")
        assert parse_arguments(["python", "train.py"]).output_ranks == {1, 2}
        assert parse_arguments(["--output-ranks", "0", "python", "train.py"]).output_ranks == {0}
        monkeypatch.setenv("BYTEPS_OUTPUT_RANKS", " ")
        assert parse_arguments(["python", "train.py"]).output_ranks is None

    @pytest.mark.parametrize("value, message", [
        ("all", "BYTEPS_OUTPUT_RANKS: expected worker ranks as non-negative integers"),
        ("4", "BYTEPS_OUTPUT_RANKS: no worker has rank 4; this job has ranks 0..3"),
    ])
    def test_bad_environment_variable_is_named(self, value, message, monkeypatch, capsys):
        monkeypatch.setenv("BYTEPS_OUTPUT_RANKS", value)
        with pytest.raises(SystemExit) as exit_info:
            parse_arguments(["--local", "--workers", "4", "--", "true"])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


class TestClusterWorkerRanks:
    @pytest.mark.timeout(30)
    def test_machine_shows_its_chosen_ranks_only(self, monkeypatch):
        monkeypatch.setitem(sys.modules, "bps_tf._core", types.SimpleNamespace(validate_environment=lambda: None))
        monkeypatch.setenv("DMLC_WORKER_ID", "1")
        monkeypatch.setenv("BYTEPS_LOCAL_SIZE", "2")
        monkeypatch.delenv("BYTEPS_LOCAL_RANK", raising=False)
        command = [sys.executable, "-c", textwrap.dedent("""
            import os, sys
            local_rank = os.environ['BYTEPS_LOCAL_RANK']
            print('hello from', local_rank)
            sys.exit('local rank 1 failed' if local_rank == '1' else 0)
        """)]
        stdout, stderr = io.StringIO(), io.StringIO()
        # Machine 1 of local size 2 holds ranks 2 and 3.
        assert run_worker_command(command, stdout=stdout, stderr=stderr, output_ranks={2}) == 1
        assert stdout.getvalue() == "[worker 1.0] hello from 0\n"
        assert ("bpslaunch: worker 1.1 exited with code 1; its output was hidden, the last line of its stderr:\n"
                "[worker 1.1] local rank 1 failed\n") in stderr.getvalue()
