"""bps_tf.Compression's choices and spellings, as the core reads them (no job needed)."""

import pytest
import tensorflow as tf

from bps_tf.ops import compression as c
from bps_tf.ops.compression import Compression


def test_spellings_round_trip_to_what_the_core_reads():
    assert Compression.onebit.wire == "onebit"
    assert Compression.onebit(momentum=0.9).wire == "onebit,momentum=0.9"
    assert Compression.topk(0.01).wire == "topk:0.01"
    assert Compression.randomk(0.05, error_feedback=False).wire == "randomk:0.05,ef=0"
    for text in ("onebit", "topk:0.01,momentum=0.9", "randomk:0.5,ef=0"):
        assert Compression.parse(text).wire == text
    assert Compression.parse("") is Compression.none
    assert Compression.parse("none") is Compression.none
    assert Compression.parse("fp16") is Compression.fp16
    assert Compression.parse("topk:0.01") == Compression.topk(0.01)


@pytest.mark.parametrize("text", ["twobit", "topk", "topk:0", "topk:2", "onebit:0.5", "onebit,momentum=1",
                                  "onebit,ef=3", "randomk:0.1,speed=2"])
def test_bad_spellings_say_how_to_write_one(text):
    with pytest.raises(ValueError, match="topk:RATIO"):
        Compression.parse(text)


def test_small_and_non_floating_tensors_travel_uncompressed(monkeypatch):
    monkeypatch.delenv("BYTEPS_MIN_COMPRESS_BYTES", raising=False)
    big, small = tf.zeros([16384]), tf.zeros([16383])
    assert Compression.onebit.applies_to(big) and not Compression.onebit.applies_to(small)
    assert not Compression.onebit.applies_to(tf.zeros([20000], tf.int32))
    assert Compression.onebit(min_bytes=0).applies_to(tf.zeros([1]))
    monkeypatch.setenv("BYTEPS_MIN_COMPRESS_BYTES", "4")
    assert Compression.onebit.applies_to(tf.zeros([1]))
    monkeypatch.setenv("BYTEPS_MIN_COMPRESS_BYTES", "lots")
    with pytest.raises(ValueError, match="BYTEPS_MIN_COMPRESS_BYTES"):
        Compression.onebit.applies_to(big)


def test_the_environment_chooses_the_strategys_compression(monkeypatch):
    monkeypatch.setenv("BYTEPS_COMPRESSION", "topk:0.001,momentum=0.9")
    assert c.from_environment() == Compression.topk(0.001, momentum=0.9)
    monkeypatch.delenv("BYTEPS_COMPRESSION")
    assert c.from_environment() is Compression.none
