#!/bin/sh
# Slurm node Prolog (slurm.conf `Prolog=`, run as root on each node at job start): gives the
# job the iosets priority its comment asks for (`--comment=io-priority=0.1`, or `io-auto` to
# clear a priority set by hand). Settings and the comment syntax: job-priority.sh beside it.
# A malformed request or a failed write is logged (syslog tag iosets-slurm) and, by default, the
# job runs without the priority; IOSETS_ON_ERROR=fail makes the prolog fail (Slurm then drains
# the node). The SPANK plugin (spank_iosets.c) refuses such a job instead.
. "$(dirname "$0")/job-priority.sh"
request=$(iosets_request) || iosets_exit 1
case "$request" in
  "") exit 0 ;;
  auto) iosets_write clear; iosets_exit $? ;;
  "priority "*) iosets_write "${request#priority }"; iosets_exit $? ;;
esac
