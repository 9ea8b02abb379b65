"""bps_tf benchmarks against TensorFlow's own collectives (docs/performance.md; README.md here maps every
table and figure to its command).

The commands are the modules of this folder, run from the repository root, e.g.
`python -m benchmarks.push_pull_loopback`; report/ turns their result files into the page's tables and
plots; ablations/ holds single-process experiments; workers/ the scripts their jobs run; lib/ what they share.
"""
