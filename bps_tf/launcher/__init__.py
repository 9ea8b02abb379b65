"""`bpslaunch`: starts the scheduler, server and worker processes of a bps_tf job.

Only the standard library is used here, so scheduler and server processes start fast and never load
TensorFlow.
"""
