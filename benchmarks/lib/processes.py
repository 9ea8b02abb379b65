"""Starting a benchmark's processes: the environment they get (testing.jobs's, which also gives the checkout's
root, `bpslaunch` and free ports) and settings given as NAME=VALUE."""

from testing.jobs import clean_env


def benchmark_env(extra=()):
    """testing.jobs.clean_env (no job's variables leak in) with TensorFlow's start-up chatter off (it would bury
    the results), plus `extra`."""
    return clean_env(**{"TF_CPP_MIN_LOG_LEVEL": "2", **dict(extra)})


def parse_env_items(items):
    """["NAME=VALUE", ...] -> dict."""
    pairs = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"a setting is NAME=VALUE, not {item!r}")
        pairs[name] = value
    return pairs

