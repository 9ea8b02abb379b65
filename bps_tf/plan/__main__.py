import sys

from bps_tf.plan.cli import main

sys.exit(main())
