"""Bad input from the user's program: wrong names, dtypes, shapes, arrays and calls."""

from tests.reliability.harness import Case, expect_error, expect_success, local_job, python

JOIN = "import numpy as np, bps_tf.numpy as bps\nbps.init()\nr = bps.rank()\n"
STILL_WORKS = ("\nassert bps.push_pull(np.ones(3, np.float32), 'fine', average=False)[0] == bps.size()\n"
               "print('job still works')\n")


def caught(statement):
    """Every worker runs `statement`, expecting an exception, then checks the job still works."""
    return (JOIN + f"try:\n    {statement}\n    print('NO ERROR')\nexcept Exception as e:\n"
            "    print('caught', type(e).__name__, e)\n" + STILL_WORKS)


def error_case(name, statement, *needles):
    return Case("bad input", name, "a clear error on every worker; the job goes on",
                lambda: _every_worker_caught(local_job(caught(statement)), needles))


def _every_worker_caught(run, needles):
    outcome = expect_error(run, *needles)
    outcome.held = outcome.held and run.code == 0 and run.out.count("caught") == 2 and "NO ERROR" not in run.out \
        and run.out.count("job still works") == 2
    return outcome


TF_IN_FUNCTION = """
import tensorflow as tf
from bps_tf.ops import Sum, push_pull
@tf.function
def f(a, b):
    return push_pull(a, name='shared', op=Sum), push_pull(b, name='shared', op=Sum)
try:
    f.get_concrete_function(tf.TensorSpec([3]), tf.TensorSpec([3]))
except ValueError as e:
    print('caught ValueError', e)
"""

CASES = [
    error_case("push_pull with an empty name", "bps.push_pull(np.ones(3, np.float32), '', average=False)",
               "non-empty string name"),
    error_case("push_pull of an int8 array", "bps.push_pull(np.ones(3, np.int8), 'x', average=False)",
               "unsupported dtype int8"),
    error_case("workers disagree on a tensor's shape",
               "bps.push_pull(np.ones(3 + r, np.float32), 'shape', average=False)",
               "declared it as"),
    error_case("workers disagree on a tensor's dtype",
               "bps.push_pull(np.ones(3, np.float32 if r else np.float64), 'dtype', average=False)", "declared it as"),
    error_case("one name for two tensors of different shapes",
               "bps.push_pull(np.ones(3, np.float32), 'two', average=False); "
               "bps.push_pull(np.ones(4, np.float32), 'two', average=False)",
               "two different tensors"),
    error_case("a read-only out= array",
               "o = np.zeros(3, np.float32); o.flags.writeable = False; "
               "bps.synchronize(bps.push_pull_async(np.ones(3, np.float32), 'ro', out=o, average=False))", "read-only"),
    error_case("an out= array of another shape",
               "bps.synchronize(bps.push_pull_async(np.ones(3, np.float32), 'o', out=np.zeros(4, np.float32), "
               "average=False))",
               "like the input"),
    error_case("average=True on integers", "bps.push_pull(np.ones(3, np.int32), 'i', average=True)",
               "needs a floating dtype"),
    error_case("init() twice", "bps.init()", "already initialised"),
    Case("bad input", "one worker push_pulls a tensor the other never does (BYTEPS_TIMEOUT=3)",
         "an error on the waiting worker naming the missing one, within the timeout",
         lambda: expect_error(local_job(JOIN + "import time\nif r == 0:\n    try:\n        bps.push_pull(np.ones(3, "
                                        "np.float32), 'lonely', average=False)\n    except Exception as e:\n"
                                        "        print('caught', e)\nelse:\n    time.sleep(8)\n", BYTEPS_TIMEOUT=3),
                              "caught", "'lonely'", "1", within=15)),
    Case("bad input", "zero-size and scalar tensors", "summed exactly",
         lambda: expect_success(local_job(JOIN + "assert bps.push_pull(np.ones(0, np.float32), 'empty', "
                                          "average=False).shape == (0,)\n"
                                          "assert bps.push_pull(np.float64(r), 'scalar', average=False) == 1\n"
                                          "print('exact')"),
                                "exact")),
    Case("bad input", "a non-contiguous input array", "summed exactly (copied first)",
         lambda: expect_success(local_job(JOIN + "a = np.arange(10, dtype=np.float32)[::2]\n"
                                          "assert (bps.push_pull(a, 'strided', average=False) == 2 * a).all()\n"
                                          "print('exact')"),
                                "exact")),
    Case("bad input", "push_pull before init()", "a clear error",
         lambda: expect_error(python("import numpy as np, bps_tf.numpy as bps\ntry:\n    bps.push_pull(np.ones(2, "
                                     "np.float32), 'x', average=False)\nexcept Exception as e:\n"
                                     "    print('caught', e)", {}),
                              "caught", "call bps_tf.init() first")),
    Case("bad input", "two push_pulls under one name in one tf.function", "an error when the function is traced",
         lambda: expect_error(python(TF_IN_FUNCTION, {}), "caught ValueError", "is used by two")),
]
