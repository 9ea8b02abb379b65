#!/usr/bin/env bash
# Installs SLURM (slurmctld, slurmd, the client commands) and munge for the tests that submit jobs to a real
# SLURM cluster on this machine (testing/slurm.py), skipping what is installed. Those tests need root, so
# elsewhere this installs nothing and they skip, saying why.
set -euo pipefail

PACKAGES=(munge slurmctld slurmd slurm-client)

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: not root: SLURM not installed, its tests will be skipped"
  exit 0
fi
missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing SLURM for its tests: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
