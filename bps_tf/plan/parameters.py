"""The constants of the step model, each measured on this project's machines, with where (SOURCES). Files
named are in docs/; commands in benchmarks/README.md."""

import dataclasses

from bps_tf.plan.partitions import MIN_SPREAD_BYTES


@dataclasses.dataclass(frozen=True)
class Parameters:
    goodput_fraction: float = 0.958
    duplex_fraction: float = 1.0
    drain_slices: float = 1.0
    message_s: float = 7.6e-6
    latency_s: float = 5e-6
    slice_bytes: int = 256000
    partition_bytes: int = 4096000
    min_spread_bytes: int = MIN_SPREAD_BYTES
    sum_bytes_per_s: float = 5.2e9
    sum_threads: int = 2
    tcp_cpu_s_per_byte: float = 0.19e-9
    io_threads: int = 4
    nccl_bus_bytes_per_s: float = 240e9
    copy_bytes_per_s: float = 50.9e9
    host_path_bytes_per_s: float = 28.0e9
    reduce_broadcast_factor: float = 1.38
    ring_step_s: float = 5e-6
    fusion_bytes: int = 64 << 20
    backward_share: float = 2 / 3

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


MEASURED = Parameters()

SOURCES = {
    "goodput_fraction": "TCP goodput of one emulated link over its tc rate, the burst of its token bucket taken off: "
                        "the best link check of the validation run (benchmarks/workers/link_check.py, "
                        "performance/step_model_validation.json); Ethernet, IP and TCP headers take 4.4% of a "
                        "1514-byte frame",
    "duplex_fraction": "a link carrying push_pull's traffic both ways at once, against one stream: fitted on the "
                       "2-worker push_pulls of the validation run (performance/step_model_validation.json), the one "
                       "fitted parameter",
    "drain_slices": "how far the pulls trail the pushes, in rounds of slices (the largest slice from each machine) "
                    "through a server link: one round, as the last slices' sums can leave only once every machine's "
                    "copy has arrived and then cross the server's link once for each machine (not fitted)",
    "message_s": "CPU per message end (a slice's push or its reply, at either host) over bps_tf's TCP transport: "
                 "64 tensors of 4 KB pushed at once on the emulated cluster's unlimited links, times the 2 cores; "
                 "the median over the validation run's configurations, 5.7-9.1 us "
                 "(performance/step_model_validation.json; 11.7-23.9 us, median 16.5, with the core of commit 24581e3: "
                 "docs/performance.md section 7 says what made messages cheaper)",
    "latency_s": "one-way network latency between machines; not measurable here (no netem): an RDMA fabric's, assumed",
    "slice_bytes": "BYTEPS_SLICE_BYTES' default (cc/common/config.h)",
    "partition_bytes": "BYTEPS_PARTITION_BYTES' default",
    "min_spread_bytes": "BYTEPS_MIN_SPREAD_BYTES' default: the partition planner's smallest piece when it spreads a "
                        "tensor over the servers (cc/ps/partition_planner.h)",
    "sum_bytes_per_s": "one server thread summing float16 into float32, 64 MB (memory-bound): 5.22 GB/s when the "
                       "constant was set; the recorded run of cpu_reducer_bench on this machine, "
                       "performance/server_sum_rate.jsonl, gives 7.3 (float32: 10.0); runs vary, 4.9 in another",
    "sum_threads": "BYTEPS_SERVER_ENGINE_THREAD's default on the 2-core machine the model was validated on "
                   "(the default is the server's cores, at most 16)",
    "tcp_cpu_s_per_byte": "the kernel's TCP CPU per byte moved between two processes, the sender's and the receiver's "
                          "together (each end taken as half): cc/tools/tcp_floor moving 4 MB messages on loopback, "
                          "median 0.19 ns of 6 runs, 0.17-0.33 (python -m benchmarks.tcp_io_threads --runs 6; "
                          "performance.md, \"TCP I/O threads\"); likely more over a NIC",
    "io_threads": "BYTEPS_TCP_IO_THREADS' default on a machine of 8 cores or more (half the cores, 1 to 4; "
                  "cc/common/config.h): a process's TCP connections spread over them, one connection on one thread",
    "nccl_bus_bytes_per_s": "NCCL reduce-scatter + all-gather of 256 MiB on 2 H200s in 1.120 ms: 2 x (1/2) x 256 MiB "
                            "per GPU (docs/gpu.md, gpu/gpu_bench.jsonl)",
    "reduce_broadcast_factor": "NCCL reduce + broadcast of a tensor (how a machine of GPUs reduces one it pushes "
                               "whole) over reduce-scatter + all-gather of the same bytes, 2 H200s: 1.544 against "
                               "1.120 ms at 256 MiB, 1.38x (64 MiB: 0.454 against 0.337 ms, 1.35x; 4 MiB, where "
                               "latency weighs more: 1.06x; docs/gpu.md, gpu/gpu_bench.jsonl)",
    "copy_bytes_per_s": "pinned chunked D2H/H2D copies on an H200, 256 MiB (docs/gpu.md, gpu/gpu_bench.jsonl)",
    "host_path_bytes_per_s": "a GPU machine's push_pulls through its host memory, all its worker processes "
                             "together: 2 x 14.0 GB/s, the median per worker of 420 MiB float32 push_pulls by two "
                             "workers sharing an H200 and its host through a server there, the copies into and "
                             "out of the server's shared memory and its sums included (docs/gpu.md, "
                             "gpu/h200_checks/); a host whose servers are elsewhere does less",
    "ring_step_s": "latency of one step of NCCL's ring between machines: not measured here (one machine), assumed",
    "fusion_bytes": "Horovod's tensor fusion buffer (HOROVOD_FUSION_THRESHOLD's default): one ring all-reduce each",
    "backward_share": "share of a step's compute in the backward pass (twice the forward's FLOPs), assumed",
}
