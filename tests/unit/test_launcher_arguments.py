"""bpslaunch's command line and cluster-mode role checks, in this process."""

import subprocess
import sys
import textwrap

import pytest

from bps_tf.launcher.arguments import parse_arguments
from bps_tf.launcher.main import main
from testing.jobs import clean_env


class TestArguments:
    @pytest.mark.parametrize("argv, message", [
        (["--local", "--workers", "0", "--", "true"], "--workers must be at least 1, got 0"),
        (["--local", "--servers", "0", "--", "true"], "--servers must be at least 1, got 0"),
        (["--local", "--local-size", "0", "--", "true"], "--local-size must be at least 1, got 0"),
        (["--local", "--local-size", "-2", "--", "true"], "--local-size must be at least 1, got -2"),
        (["--local", "--local-size", "two", "--", "true"], "argument --local-size: invalid int value: 'two'"),
        (["--local-size", "2", "python", "train.py"], "--local-size only apply with --local"),
        (["--local", "--timeout", "0", "--", "true"], "--timeout must be positive"),
        (["--local", "--workers", "2"], "--local needs the command to run after --"),
        (["--local", "--"], "--local needs the command to run after --"),
        (["--workers", "2", "python", "train.py"], "--workers only apply with --local"),
    ])
    @pytest.mark.timeout(10)
    def test_bad_arguments_are_usage_errors(self, argv, message, capsys):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err

    @pytest.mark.timeout(10)
    def test_options_after_the_command_belong_to_the_command(self):
        args = parse_arguments(["--local", "--workers", "2", "--", "python", "train.py", "--workers", "5", "--"])
        assert (args.workers, args.servers, args.command) == (2, 1, ["python", "train.py", "--workers", "5", "--"])
        assert args.local_size == 1
        assert parse_arguments(["--local", "--local-size", "4", "--", "python", "train.py"]).local_size == 4
        args = parse_arguments(["python", "train.py", "--lr", "0.1"])
        assert (args.local, args.command) == (False, ["python", "train.py", "--lr", "0.1"])


class TestRoles:
    @pytest.mark.timeout(10)
    def test_unknown_role_is_rejected(self, monkeypatch, capsys):
        monkeypatch.setenv("DMLC_ROLE", "chief")
        assert main(["python", "train.py"]) == 1
        assert "DMLC_ROLE must be scheduler, server or worker, not 'chief'" in capsys.readouterr().err


class TestImports:
    @pytest.mark.timeout(60)
    def test_launcher_never_imports_tensorflow(self):
        check = """
            import sys
            import bps_tf.launcher.main, bps_tf.launcher.role
            heavy = [name for name in ('tensorflow', 'numpy', 'keras') if name in sys.modules]
            assert not heavy, heavy
        """
        result = subprocess.run([sys.executable, "-c", textwrap.dedent(check)], env=clean_env(), capture_output=True, text=True, timeout=50)
        assert result.returncode == 0, result.stderr
