"""The malloc bpslaunch preloads (bps_tf/launcher/allocator.py): jemalloc where it is installed, glibc's malloc
on request or where it is not, a library the user names, and a malloc the user preloads already kept."""

import pytest

from bps_tf.launcher import allocator
from bps_tf.launcher.local_env import job_environment, role_environment

JEMALLOC = "libjemalloc.so.2"


def found(name=JEMALLOC):
    return lambda: name


@pytest.fixture(autouse=True)
def no_router(monkeypatch):
    """The tests below see no router unless they make one (the built tree has it)."""
    monkeypatch.setattr(allocator, "router", lambda: None)


def test_the_router_goes_ahead_of_jemalloc_only(tmp_path, monkeypatch):
    routes = tmp_path / "libbps_preload.so"
    routes.write_bytes(b"")
    monkeypatch.setattr(allocator, "router", lambda: str(routes))
    assert allocator.apply({}, find=found())["LD_PRELOAD"] == f"{routes} {JEMALLOC}"
    user_preloaded = {"LD_PRELOAD": "/opt/libjemalloc.so.2 /opt/libhook.so"}
    assert allocator.apply(user_preloaded)["LD_PRELOAD"] == f"{routes} /opt/libjemalloc.so.2 /opt/libhook.so"
    assert allocator.apply({"LD_PRELOAD": "/usr/lib/libtcmalloc_minimal.so.4"}, find=found()) == {
        "LD_PRELOAD": "/usr/lib/libtcmalloc_minimal.so.4"}
    assert "LD_PRELOAD" not in allocator.apply({"BYTEPS_ALLOCATOR": "system"}, find=found())
    env = allocator.apply({}, find=found())
    assert allocator.apply(dict(env), find=found()) == env  # not added twice


def test_a_router_ld_preload_cannot_name_is_left_out(tmp_path, monkeypatch):
    package = tmp_path / "my env" / "bps_tf"
    (package / "launcher").mkdir(parents=True)
    (package / "libbps_preload.so").write_bytes(b"")
    monkeypatch.undo()  # the real router(), looking next to a package installed under a path with a space
    monkeypatch.setattr(allocator, "__file__", str(package / "launcher" / "allocator.py"))
    assert allocator.router() is None
    env = allocator.apply({}, find=found())
    assert env["LD_PRELOAD"] == JEMALLOC and allocator.apply(dict(env), find=found()) == env


def test_jemalloc_is_preloaded_by_default_where_installed():
    assert allocator.apply({}, find=found())["LD_PRELOAD"] == JEMALLOC


def test_without_jemalloc_the_default_leaves_the_environment_as_it_is():
    assert allocator.apply({"PATH": "/bin"}, find=found(None)) == {"PATH": "/bin"}


def test_jemalloc_asked_for_but_missing_says_what_to_do():
    with pytest.raises(ValueError, match="apt-get install libjemalloc2.*BYTEPS_ALLOCATOR=system"):
        allocator.apply({"BYTEPS_ALLOCATOR": "jemalloc"}, find=found(None))


def test_system_preloads_nothing():
    assert "LD_PRELOAD" not in allocator.apply({"BYTEPS_ALLOCATOR": "system"}, find=found())


def test_a_library_given_by_path_is_preloaded_by_its_absolute_path(tmp_path, monkeypatch):
    library = tmp_path / "libmymalloc.so"
    library.write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    env = allocator.apply({"BYTEPS_ALLOCATOR": "libmymalloc.so"}, find=found())
    assert env["LD_PRELOAD"] == str(library)


def test_a_path_ld_preload_cannot_carry_is_refused(tmp_path):
    library = tmp_path / "my malloc.so"
    library.write_bytes(b"")
    with pytest.raises(ValueError, match="space or a colon"):
        allocator.library({"BYTEPS_ALLOCATOR": str(library)})


def test_a_path_that_is_no_file_is_refused(tmp_path):
    with pytest.raises(ValueError, match="not a file; give jemalloc, system"):
        allocator.library({"BYTEPS_ALLOCATOR": str(tmp_path / "missing.so")})


def test_a_malloc_the_user_preloads_is_kept():
    env = {"LD_PRELOAD": "/usr/lib/libtcmalloc_minimal.so.4"}
    assert allocator.apply(dict(env), find=found()) == env


def test_other_preloads_stay_behind_the_malloc():
    env = allocator.apply({"LD_PRELOAD": "/opt/libhook.so"}, find=found())
    assert env["LD_PRELOAD"] == f"{JEMALLOC} /opt/libhook.so"


def test_in_effect_once_preloaded():
    assert not allocator.in_effect({}) or allocator.find_jemalloc() is None
    assert allocator.in_effect(allocator.apply({}))
    assert allocator.in_effect({"BYTEPS_ALLOCATOR": "system"})


def test_every_process_of_a_local_job_gets_it(monkeypatch):
    monkeypatch.setattr(allocator, "find_jemalloc", found())
    job = job_environment({}, 1, 1, 9000)
    for role in ("scheduler", "server"):
        assert role_environment(job, role)["LD_PRELOAD"] == JEMALLOC
    assert role_environment(job, "worker", 0)["LD_PRELOAD"] == JEMALLOC


def test_a_library_preloaded_already_is_not_added_twice(tmp_path):
    library = tmp_path / "libmymalloc.so"
    library.write_bytes(b"")
    env = {"BYTEPS_ALLOCATOR": str(library), "LD_PRELOAD": str(library)}
    assert allocator.apply(dict(env), find=found()) == env
    assert allocator.in_effect(env)
