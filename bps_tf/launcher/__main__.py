"""`python -m bps_tf.launcher` is the same as the `bpslaunch` console script."""

import sys

from bps_tf.launcher.main import main

sys.exit(main())
