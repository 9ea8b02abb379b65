#!/bin/sh
echo "Coverage tools are not available offline." >&2
exit 1
