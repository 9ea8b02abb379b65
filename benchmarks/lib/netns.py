"""An emulated cluster on this machine: each host is a network namespace with one link to a switch (a bridge
in a namespace of its own), and each link is limited in both directions with `tc` (tbf for the rate, netem
for the delay). Everything lives in namespaces this module creates and always deletes, also on failure.

Needs root (ip netns, tc). Traffic never leaves the namespaces: there is no route out of them.
"""

import os
import signal
import subprocess

PREFIX = "bpsbench-"
SUBNET = "10.213.0"  # host i gets 10.213.0.(i+1)/24; private to these namespaces
QUEUE = "50ms"  # a link direction's buffer, as time at its rate: 6.25 MB at 1 Gbit/s
# A host's own egress holds whatever its sockets hand it (each socket at most its send buffer, and TCP
# small queues' 4 MB), as a real NIC's queue pushes back on TCP; 50 ms at 100 Mbit/s (625 KB) overflowed
# with a server's replies to 8 workers, a loss that no real host adds.
HOST_QUEUE_BYTES = 64 << 20
# Every emulated host's TCP: Linux's default congestion control, whatever this machine's own setting (a new
# namespace inherits it; with BBR, 8 workers pushing to 4 servers at 100 Mbit/s took 3.2-4.9 s per 16 MiB call,
# the servers' replies to some workers falling seconds behind, and 3.1-3.3 s with CUBIC). The emulated links
# reorder packets now and then (two cores take turns at the veth queues), which real links do not, and CUBIC
# read each reordering as a loss (64 MiB at 1 Gbit/s: 0.58-0.94 s per call, no packet dropped); tolerating a
# deep reordering takes that away and costs nothing where nothing is lost.
CONGESTION_CONTROL = "cubic"
HOST_SYSCTLS = {"net.ipv4.tcp_congestion_control": CONGESTION_CONTROL, "net.ipv4.tcp_reordering": "127"}
ALLOWED_CONTROLS = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"


def _run(*argv):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.strip()}")


def _ns_exists_for_dead_pid(name):
    try:
        pid = int(name[len(PREFIX):].split("-")[0])
    except ValueError:
        return False
    return not os.path.exists(f"/proc/{pid}")


def delete_stale_namespaces():
    """Namespaces of earlier runs whose process is gone (killed before its cleanup could run)."""
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
    for line in listing.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(PREFIX) and _ns_exists_for_dead_pid(name):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


def netem_available():
    """Whether this kernel has netem (some container kernels have only tbf, htb and pfifo)."""
    probe = PREFIX + f"{os.getpid()}-probe"
    _run("ip", "netns", "add", probe)
    try:
        _run("ip", "-n", probe, "link", "add", "probe0", "type", "veth", "peer", "name", "probe1")
        added = subprocess.run(["ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "probe0", "root", "netem",
                                "delay", "1ms"], capture_output=True, timeout=30)
        return added.returncode == 0
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=30)


def _limit(ns, dev, rate, delay, queue):
    """Egress of `dev` in `ns`: at most `rate`, after `delay` (one-way) when given; packets that would wait
    longer than `queue` in the rate limiter are dropped (the link's buffer: a time at the link's rate such as
    "50ms", or a number of bytes)."""
    buffer = ["limit", str(queue)] if isinstance(queue, int) else ["latency", queue]
    tbf = ["tbf", "rate", rate, "burst", "256kb", *buffer]
    if delay and delay not in ("0", "0ms"):
        if not netem_available():
            raise RuntimeError("--delay needs tc's netem qdisc, which this kernel lacks (sch_netem); "
                               "leave the delay out to limit the rate only")
        _run("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "netem",
             "delay", delay, "limit", "100000")
        _run("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", *tbf)
    else:
        _run("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", *tbf)


def allow_congestion_control(name):
    """Lets namespaces other than the machine's choose TCP congestion control `name` (they may choose only
    those the machine's namespace allows)."""
    with open(ALLOWED_CONTROLS) as allowed:
        names = allowed.read().split()
    if name not in names:
        with open(ALLOWED_CONTROLS, "w") as allowed:
            allowed.write(" ".join([*names, name]))


def _descendants(pid):
    """Every process below `pid` (children first found through /proc), deepest last."""
    found, queue = [], [pid]
    while queue:
        parent = queue.pop()
        try:
            for task in os.listdir(f"/proc/{parent}/task"):
                with open(f"/proc/{parent}/task/{task}/children") as children:
                    kids = [int(k) for k in children.read().split()]
                found += kids
                queue += kids
        except (FileNotFoundError, ProcessLookupError):
            pass
    return found


class EmulatedCluster:
    """with EmulatedCluster(["sched", "w0", "s0"], rate="1gbit", delay="0.1ms") as cluster: ...

    rate: each host's link speed, in each direction (tc syntax; None: unlimited). delay: one-way latency added
    to what each host sends, so host-to-host round trips take 2 * delay. switch_queue: how much the switch
    buffers for each port, as time at the port's rate (data-centre switches hold far less than QUEUE). A
    host's own egress queues HOST_QUEUE_BYTES: a real NIC pushes back on TCP instead of dropping. Every host's
    TCP is set as HOST_SYSCTLS says."""

    def __init__(self, hosts, rate="1gbit", delay=None, switch_queue=QUEUE):
        self.hosts = list(hosts)
        self.rate, self.delay, self.switch_queue = rate, delay, switch_queue
        self._tag = f"{PREFIX}{os.getpid()}-"
        self._created = []
        self._processes = []

    def namespace(self, host):
        return self._tag + host

    def address(self, host):
        return f"{SUBNET}.{self.hosts.index(host) + 1}"

    def __enter__(self):
        delete_stale_namespaces()
        allow_congestion_control(CONGESTION_CONTROL)
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def _add_namespace(self, name):
        _run("ip", "netns", "add", name)
        self._created.append(name)
        _run("ip", "-n", name, "link", "set", "lo", "up")

    def _create(self):
        switch = self._tag + "switch"
        self._add_namespace(switch)
        _run("ip", "-n", switch, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", switch, "link", "set", "br0", "up")
        for i, host in enumerate(self.hosts):
            ns = self.namespace(host)
            self._add_namespace(ns)
            port = f"p{i}"
            _run("ip", "-n", switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _run("ip", "-n", switch, "link", "set", port, "master", "br0", "up")
            _run("ip", "-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            for name, value in HOST_SYSCTLS.items():
                _run("ip", "netns", "exec", ns, "sysctl", "-qw", f"{name}={value}")
            if self.rate:
                _limit(ns, "eth0", self.rate, self.delay, HOST_QUEUE_BYTES)  # what the host sends
                _limit(switch, port, self.rate, None, self.switch_queue)  # what the host receives

    def popen(self, host, argv, env, log_path):
        """Starts `argv` inside `host`'s namespace, output to `log_path`; killed (whole group) by close()."""
        log = open(log_path, "w")
        process = subprocess.Popen(["ip", "netns", "exec", self.namespace(host), *argv], env=env, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self._processes.append(process)
        return process

    def close(self):
        for process in self._processes:
            if process.poll() is None:
                # bpslaunch runs its command in a process group of its own: kill every descendant by pid.
                for pid in [*_descendants(process.pid), process.pid]:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            process.wait()
        self._processes.clear()
        for name in reversed(self._created):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
        self._created.clear()
