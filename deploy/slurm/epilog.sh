#!/bin/sh
# Slurm node Epilog (slurm.conf `Epilog=`, run as root on each node at job end): clears the
# priority that prolog.sh gave the job. Never fails (a failing epilog drains the node): a failed
# clear is logged, and the priority stays until `iosets ctl clear-priority JOB`.
. "$(dirname "$0")/job-priority.sh"
request=$(iosets_request) || exit 0
case "$request" in
  "priority "*) iosets_write clear ;;
esac
exit 0
