"""BytePSStrategy's default devices with one process per GPU (bpslaunch --local-size N): the GPU of the
process's local rank, made the only one TensorFlow uses (TensorFlow's device listing is stubbed: this
machine has no GPU)."""

import types

import pytest

tf = pytest.importorskip("tensorflow")

from bps_tf.strategy import strategy  # noqa: E402


class FakeConfig:
    def __init__(self, gpus, initialised=False):
        self.physical = [types.SimpleNamespace(name=f"/physical_device:GPU:{i}") for i in range(gpus)]
        self.visible = list(self.physical)
        self.initialised = initialised

    def list_physical_devices(self, kind):
        return self.physical if kind == "GPU" else []

    def set_visible_devices(self, devices, kind):
        if self.initialised:
            raise RuntimeError("Visible devices cannot be modified after being initialized")
        self.visible = list(devices)

    def list_logical_devices(self, kind):
        if kind != "GPU":
            return [types.SimpleNamespace(name="/device:CPU:0")]
        return [types.SimpleNamespace(name=f"/device:GPU:{i}") for i in range(len(self.visible))]


@pytest.fixture
def machine(monkeypatch):
    def make(gpus, local_rank, local_size, initialised=False):
        config = FakeConfig(gpus, initialised)
        monkeypatch.setattr(strategy.tf, "config", config)
        monkeypatch.setattr(strategy, "local_rank", lambda: local_rank)
        monkeypatch.setattr(strategy, "local_size", lambda: local_size)
        return config
    return make


def test_one_process_per_gpu_takes_the_gpu_of_its_local_rank(machine):
    config = machine(gpus=4, local_rank=2, local_size=4)
    assert strategy._local_devices() == ["/device:GPU:0"]
    assert [d.name for d in config.visible] == ["/physical_device:GPU:2"]


def test_when_tensorflow_already_runs_on_every_gpu_it_picks_its_own_among_them(machine):
    config = machine(gpus=2, local_rank=1, local_size=2, initialised=True)
    assert strategy._local_devices() == ["/device:GPU:1"]
    assert len(config.visible) == 2


def test_one_process_drives_every_gpu(machine):
    machine(gpus=2, local_rank=0, local_size=1)
    assert strategy._local_devices() == ["/device:GPU:0", "/device:GPU:1"]


def test_without_gpus_the_cpu(machine):
    machine(gpus=0, local_rank=1, local_size=2)
    assert strategy._local_devices() == ["/device:CPU:0"]
