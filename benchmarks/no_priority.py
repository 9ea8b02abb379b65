"""For the priority benchmark only: makes BytePSStrategy send every gradient with priority 0.

bps_tf has no switch for this (BytePSCrossDeviceOps always gives layers nearer the input a higher priority),
so the benchmark replaces the push_pull that module calls with one that drops the priority. The core then
orders partitions by key alone, i.e. by the hash of their names: an arbitrary but fixed order.
"""


def install():
    from bps_tf.ops import collectives, gather
    from bps_tf.strategy import cross_device_ops

    def push_pull_without_priority(*args, priority=0, **kwargs):
        return collectives.push_pull(*args, priority=0, **kwargs)

    gather_rows = gather._gather_rows

    def gather_rows_without_priority(rows, before, total, name, priority):
        return gather_rows(rows, before, total, name, 0)

    cross_device_ops.push_pull = gather.push_pull = push_pull_without_priority
    gather._gather_rows = gather_rows_without_priority
