"""Horovod's collectives (bps_tf.tensorflow) against NumPy, eagerly and inside tf.function: every op and
dtype, uneven shapes, scalars and empty tensors, process sets, grouped forms, gradients with Horovod's
meaning, join and barrier, objects, the job-shape ops, names not offered, and the timeline.

Data is small integers: exact in every dtype, different on every worker."""

import json
import os
import sys
import tempfile

import numpy as np
import tensorflow as tf

import bps_tf.tensorflow as hvd

REDUCE_DTYPES = [tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int32, tf.int64, tf.int8, tf.uint8, tf.int16,
                 tf.uint16, tf.uint32]
NUMPY_OPS = {hvd.Sum: np.sum, hvd.Min: np.min, hvd.Max: np.max, hvd.Product: np.prod}


def data(rank, shape, dtype, low=-2, high=3):
    """Values in [low, high) that differ by worker (non-negative for unsigned dtypes)."""
    n = int(np.prod(shape))
    values = (np.arange(n) * 7 + rank * 3) % (high - low) + low
    if dtype.is_unsigned:
        values = np.abs(values)
    return tf.constant(values.reshape(shape), dtype)


def numpy_of(tensor):
    return tensor.numpy().astype(np.float64)


def expected(op, shape, dtype, ranks):
    stacked = np.stack([numpy_of(data(r, shape, dtype)) for r in ranks])
    if op == hvd.Average:
        return stacked.sum(0) / len(ranks)
    result = NUMPY_OPS[op](stacked, axis=0)
    if dtype.is_integer:  # sums and products wrap in the dtype, as the dtype's own arithmetic does
        result = tf.cast(tf.constant(result.astype(np.int64)), dtype).numpy().astype(np.float64)
    return result


def check_allreduce(rank, size):
    in_function = tf.function(lambda t, op, name: hvd.allreduce(t, op=op, name=name), autograph=False)
    for dtype in REDUCE_DTYPES:
        for op in (hvd.Sum, hvd.Min, hvd.Max, hvd.Product) + ((hvd.Average,) if dtype.is_floating else ()):
            for shape in [(), (0,), (5,), (3, 1, 4)]:
                for mode, run in (("eager", lambda t, o, n: hvd.allreduce(t, op=o, name=n)),
                                  ("function", in_function)):
                    name = f"{mode}.{op}.{dtype.name}.{shape}"
                    got = run(data(rank, shape, dtype), op, name)
                    assert got.dtype == dtype and tuple(got.shape) == shape, (name, got.dtype, got.shape)
                    np.testing.assert_allclose(numpy_of(got), expected(op, shape, dtype, range(size)), rtol=1e-2,
                                               err_msg=name)
    # The deprecated average flag, scaling and a derived name.
    x = data(rank, (6,), tf.float32)
    np.testing.assert_array_equal(hvd.allreduce(x, average=False).numpy(), expected(hvd.Sum, (6,), tf.float32, range(size)))
    scaled = hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=4.0)
    np.testing.assert_allclose(scaled.numpy(), 2.0 * expected(hvd.Sum, (6,), tf.float32, range(size)))
    ints = hvd.allreduce(tf.constant([3, 5], tf.int32), op=hvd.Sum, prescale_factor=2.0, name="scaled-ints")
    np.testing.assert_array_equal(ints.numpy(), [6 * size, 10 * size])
    # Gradients: of a sum, the sum of the upstream gradients.
    w = tf.Variable(tf.fill([3], float(rank + 1)))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(hvd.allreduce(w * w, op=hvd.Sum, name="grad") * float(rank + 1))
    np.testing.assert_allclose(tape.gradient(loss, w).numpy(), 2.0 * (rank + 1) * sum(range(1, size + 1)))
    # Sparse: gathered rows.
    slices = tf.IndexedSlices(tf.fill([2, 2], float(rank + 1)), tf.constant([rank, 3]), tf.constant([4, 2]))
    dense = tf.convert_to_tensor(hvd.allreduce(slices, op=hvd.Sum, name="sparse")).numpy()
    reference = np.zeros((4, 2))
    for r in range(size):
        reference[r] += r + 1
        reference[3] += r + 1
    np.testing.assert_array_equal(dense, reference)


def check_grouped_allreduce(rank, size):
    tensors = [data(rank, (4,), tf.float32), data(rank, (2, 3), tf.int64), data(rank, (), tf.float64)]
    for run in (lambda ts: hvd.grouped_allreduce(ts, op=hvd.Sum, name="group"),
                tf.function(lambda ts: hvd.grouped_allreduce(ts, op=hvd.Sum), autograph=False)):
        for got, tensor in zip(run(tensors), tensors):
            np.testing.assert_array_equal(numpy_of(got), expected(hvd.Sum, tensor.shape, tensor.dtype, range(size)))
    means = hvd.grouped_allreduce([tf.ones([2]) * rank, tf.ones([1]) * rank])  # default: Average
    np.testing.assert_allclose(means[0].numpy(), (size - 1) / 2)


def check_allgather(rank, size):
    for dtype in [tf.float32, tf.int64, tf.bool, tf.uint8, tf.float16]:
        rows = [(r % 3) for r in range(size)]  # uneven, some workers empty
        mine = tf.cast(tf.fill([rows[rank], 2], rank + 1) if dtype != tf.bool else
                       tf.fill([rows[rank], 2], rank % 2 == 0), dtype)
        got = hvd.allgather(mine, name=f"gather.{dtype.name}")
        parts = [np.full((rows[r], 2), r + 1 if dtype != tf.bool else r % 2 == 0) for r in range(size)]
        np.testing.assert_array_equal(got.numpy(), np.concatenate(parts).astype(dtype.as_numpy_dtype))
    scalar = hvd.allgather(tf.constant(float(rank)), name="scalar")
    np.testing.assert_array_equal(scalar.numpy(), np.arange(size, dtype=np.float32))
    in_function = tf.function(lambda t: hvd.allgather(t), autograph=False)
    np.testing.assert_array_equal(in_function(tf.fill([rank + 1], rank)).numpy(),
                                  np.concatenate([np.full(r + 1, r) for r in range(size)]))
    grouped = hvd.grouped_allgather([tf.fill([1], rank), tf.fill([2, 1], float(rank))], name="grouped-gather")
    np.testing.assert_array_equal(grouped[0].numpy(), np.arange(size))
    assert tuple(grouped[1].shape) == (2 * size, 1)
    # Horovod's gradient: this worker's rows of the upstream gradients averaged over the workers.
    w = tf.Variable(tf.ones([rank + 1]))
    with tf.GradientTape() as tape:
        gathered = hvd.allgather(w * 2.0, name="grad-gather")
        loss = tf.reduce_sum(gathered * tf.cast(tf.range(tf.shape(gathered)[0]) + rank, tf.float32))
    before = sum(r + 1 for r in range(rank))
    mean_weight = np.arange(before, before + rank + 1) + (size - 1) / 2
    np.testing.assert_allclose(tape.gradient(loss, w).numpy(), 2.0 * mean_weight)
    objects = hvd.allgather_object({"rank": rank, "text": "x" * rank})
    assert objects == [{"rank": r, "text": "x" * r} for r in range(size)], objects


def check_alltoall(rank, size):
    # Worker r sends (r + j) % 3 rows to worker j; row values say who sent them and where they went.
    splits = [(rank + j) % 3 for j in range(size)]
    rows = np.concatenate([np.full((splits[j], 2), 100 * rank + j) for j in range(size)]).reshape(-1, 2)
    out, received = hvd.alltoall(tf.constant(rows, tf.int32), splits=tf.constant(splits, tf.int32), name="a2a")
    want = np.concatenate([np.full(((r + rank) % 3, 2), 100 * r + rank) for r in range(size)]).reshape(-1, 2)
    np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(received.numpy(), [(r + rank) % 3 for r in range(size)])
    assert received.dtype == tf.int32
    even = hvd.alltoall(tf.range(2 * size) + 10 * rank, name="a2a-even")
    np.testing.assert_array_equal(even.numpy(), np.concatenate([[10 * r + 2 * rank, 10 * r + 2 * rank + 1]
                                                                for r in range(size)]))
    # Gradient: each sent row gets the gradient its receiver computed for it.
    w = tf.Variable(tf.ones([size, 1]) * (rank + 1))
    with tf.GradientTape() as tape:
        got = hvd.alltoall(w, name="a2a-grad")
        loss = tf.reduce_sum(got * float(rank + 1))
    np.testing.assert_allclose(tape.gradient(loss, w).numpy().ravel(), np.arange(1, size + 1, dtype=np.float32))
    try:
        hvd.alltoall(tf.ones([size + 1]), name="a2a-bad")
        raise AssertionError("an uneven split without splits was accepted")
    except tf.errors.InvalidArgumentError as error:
        assert "divide" in str(error), error


def check_reducescatter(rank, size):
    for rows in (2 * size, 2 * size + 1, size - 1):
        tensor = tf.reshape(tf.range(rows * 2, dtype=tf.float32), [rows, 2]) * (rank + 1)
        total = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2) * sum(range(1, size + 1))
        base, extra = divmod(rows, size)
        start = rank * base + min(rank, extra)
        length = base + (1 if rank < extra else 0)
        got = hvd.reducescatter(tensor, op=hvd.Sum, name=f"rs.{rows}")
        np.testing.assert_array_equal(got.numpy(), total[start:start + length])
        mean = hvd.reducescatter(tensor, name=f"rs-mean.{rows}")
        np.testing.assert_allclose(mean.numpy(), total[start:start + length] / size)
    grouped = hvd.grouped_reducescatter([tf.ones([size, 3]), tf.ones([size])], op=hvd.Sum, name="grouped-rs")
    np.testing.assert_array_equal(grouped[0].numpy(), np.full((1, 3), size))
    # Horovod's gradient (Sum): the upstream gradients gathered, times the number of workers.
    w = tf.Variable(tf.ones([size, 2]))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(hvd.reducescatter(w, op=hvd.Sum, name="rs-grad") * float(rank + 1))
    np.testing.assert_allclose(tape.gradient(loss, w).numpy(),
                               np.repeat(np.arange(1, size + 1, dtype=np.float32)[:, None] * size, 2, axis=1))


def check_process_sets(rank, size):
    evens = hvd.add_process_set([r for r in range(size) if r % 2 == 0])
    odds = hvd.add_process_set(hvd.ProcessSet([r for r in range(size) if r % 2 == 1])) if size > 1 else None
    mine = evens if rank % 2 == 0 else odds
    members = mine.ranks
    assert mine.included() and mine.size() == len(members) and mine.rank() == members.index(rank)
    got = hvd.allreduce(data(rank, (5,), tf.float32), op=hvd.Sum, process_set=mine, name="set-sum")
    np.testing.assert_array_equal(got.numpy(), expected(hvd.Sum, (5,), tf.float32, members))
    mean = hvd.allreduce(data(rank, (5,), tf.float32), process_set=mine, name="set-mean")
    np.testing.assert_allclose(mean.numpy(), expected(hvd.Average, (5,), tf.float32, members))
    top = hvd.allreduce(data(rank, (5,), tf.int32), op=hvd.Max, process_set=mine, name="set-max")
    np.testing.assert_array_equal(numpy_of(top), expected(hvd.Max, (5,), tf.int32, members))
    root = members[-1]
    value = hvd.broadcast(tf.fill([3], rank), root_rank=root, process_set=mine, name="set-broadcast")
    np.testing.assert_array_equal(value.numpy(), [root] * 3)
    gathered = hvd.allgather(tf.fill([1], rank), process_set=mine, name="set-gather")
    np.testing.assert_array_equal(gathered.numpy(), members)
    assert hvd.broadcast_object(f"from {root}" if rank == root else None, root_rank=root, process_set=mine) == \
        f"from {root}"
    assert hvd.allgather_object(rank, process_set=mine) == members
    hvd.barrier(process_set=mine)
    variable = tf.Variable(float(rank))
    hvd.broadcast_variables([variable], root_rank=root, process_set=mine)
    assert variable.numpy() == root
    assert hvd.size_op(mine.process_set_id).numpy() == len(members)
    assert hvd.process_set_included_op(evens.process_set_id).numpy() == (rank % 2 == 0)
    outsider = odds if mine is evens else evens
    if outsider is not None:
        try:
            hvd.allreduce(tf.ones([1]), process_set=outsider, name="not-mine")
            raise AssertionError("a collective over a set without this worker was accepted")
        except ValueError as error:
            assert "not in" in str(error), error
    try:
        hvd.add_process_set([0])  # duplicates the evens when there is one even worker; else a new set
        if size > 1 and len(evens.ranks) == 1:
            raise AssertionError("a second set with the same ranks was accepted")
    except ValueError as error:
        assert "registered already" in str(error), error
    for process_set in (evens, odds):
        if process_set is not None:
            assert hvd.remove_process_set(process_set)
    assert not hvd.remove_process_set(evens)


def check_broadcasts(rank, size):
    variables = [tf.Variable(tf.fill([2, 2], float(rank))), tf.Variable(rank, dtype=tf.int64),
                 tf.Variable(tf.fill([3], rank % 2 == 1))]
    returned = hvd.broadcast_(variables, root_rank=size - 1, name="in-place")
    assert returned is not None and len(returned) == 3
    np.testing.assert_array_equal(variables[0].numpy(), np.full((2, 2), size - 1.0))
    assert variables[1].numpy() == size - 1
    np.testing.assert_array_equal(variables[2].numpy(), [(size - 1) % 2 == 1] * 3)
    for dtype in (tf.int8, tf.uint16, tf.bool):
        got = hvd.broadcast(tf.cast(tf.fill([4], rank + 1), dtype), root_rank=0, name=f"b.{dtype.name}")
        assert got.dtype == dtype
        np.testing.assert_array_equal(got.numpy(), np.ones(4, dtype.as_numpy_dtype))
    function = hvd.broadcast_object_fn(root_rank=size - 1, name="fn")
    assert function({"who": rank}) == {"who": size - 1}


def check_join(rank, size):
    """Workers with less data join early; the others' sums go on without them, then every join returns."""
    steps = rank + 1  # worker r has r + 1 batches
    for step in range(size):
        if step == steps:
            break
        got = hvd.allreduce(tf.fill([3], float(rank + 1)), op=hvd.Sum, name="join-step")
        still_running = [r for r in range(size) if r + 1 > step]
        np.testing.assert_array_equal(got.numpy(), np.full(3, float(sum(r + 1 for r in still_running))))
    last = hvd.join()
    assert int(last.numpy()) == size - 1, (rank, last)
    after = hvd.allreduce(tf.ones([2]), op=hvd.Sum, name="after-join")  # a new generation: everybody again
    np.testing.assert_array_equal(after.numpy(), [size, size])
    hvd.barrier()


def check_job_shape(rank, size):
    assert hvd.rank_op().numpy() == rank and hvd.size_op().numpy() == size
    assert hvd.local_rank_op().numpy() == hvd.local_rank() and hvd.local_size_op().numpy() == hvd.local_size()
    assert hvd.cross_size() * hvd.local_size() == size and hvd.cross_rank() == rank // hvd.local_size()
    assert hvd.is_homogeneous()
    graph = tf.Graph()
    with graph.as_default():
        rank_in_graph = hvd.rank_op()  # built before it runs: read when it runs
    with tf.compat.v1.Session(graph=graph) as session:
        assert session.run(rank_in_graph) == rank
    assert not hvd.mpi_built() and not hvd.gloo_built() and not hvd.mpi_enabled() and not hvd.rocm_built()
    assert hvd.cuda_built() == hvd.nccl_built() == bool(tf.config.list_physical_devices("GPU") and hvd.cuda_built())


def check_not_offered():
    # Horovod's elastic API is offered (bps_tf.tensorflow.elastic, tests/multiprocess/test_elastic.py).
    from bps_tf.tensorflow import elastic

    assert hvd.elastic is elastic and callable(elastic.run)
    try:
        hvd.allreduce(tf.ones([2]), op=hvd.Adasum)
        raise AssertionError("Adasum was accepted")
    except NotImplementedError as error:
        assert "Average" in str(error), error
    try:
        hvd.init(comm=[0, 1])
        raise AssertionError("an MPI communicator was accepted")
    except ValueError as error:
        assert "communicator" in str(error)


def check_timeline(rank, size):
    directory = tempfile.mkdtemp(prefix="bps_tf_timeline_")
    path = os.path.join(directory, "timeline.json")
    hvd.start_timeline(path)
    for _ in range(2):
        hvd.allreduce(tf.ones([300000]), op=hvd.Sum, name="traced")
    hvd.stop_timeline()
    mine = path if rank == 0 else os.path.join(directory, f"timeline.rank{rank}.json")
    with open(mine) as trace:
        events = json.load(trace)
    stages = {e["name"] for e in events if e.get("ph") == "X" and "traced" in e["args"]["tensor"]}
    assert {"QUEUE", "DECLARE", "SCHEDULE", "PUSH", "SUM_PULL"} <= stages, stages
    assert all(e["pid"] == rank for e in events)


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    checks = [check_allreduce, check_grouped_allreduce, check_allgather, check_alltoall, check_reducescatter,
              check_process_sets, check_broadcasts, check_join, check_job_shape, check_timeline]
    only = sys.argv[1:]
    for check in checks:
        if not only or check.__name__ in only:
            check(rank, size)
    check_not_offered()
    print(f"rank {rank}: horovod collectives exact", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
