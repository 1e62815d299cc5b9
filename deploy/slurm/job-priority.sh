#!/bin/sh
# Shared by deploy/slurm/prolog.sh and epilog.sh: the job's iosets priority from its comment.
# Sourced, not run. Expects SLURM_JOB_ID (Slurm sets it for Prolog and Epilog).
#
# Settings (environment, or /etc/iosets/slurm.conf, a shell fragment sourced if it exists):
#   IOSETS_MOUNT     the `iosets mount` whose .iosets/jobs/<id>/priority is written
#                    (default /mnt/iosets)
#   IOSETS_ON_ERROR  continue (default) or fail. A failing Prolog makes Slurm drain the node
#                    and requeue the job held, so `fail` only suits sites that want exactly that.
#   IOSETS_TIMEOUT   seconds one write may take before it counts as failed (default 10)
#
# The job asks with its comment: `--comment=io-priority=P` (P a finite positive number) or
# `--comment=io-auto`, alone or among other words of the comment separated by spaces, commas or
# semicolons. The node prolog does not see the job's environment, so the comment is read with
# `scontrol show job` (one query to slurmctld per job and node).
[ -r /etc/iosets/slurm.conf ] && . /etc/iosets/slurm.conf
IOSETS_MOUNT=${IOSETS_MOUNT:-/mnt/iosets}
IOSETS_ON_ERROR=${IOSETS_ON_ERROR:-continue}
IOSETS_TIMEOUT=${IOSETS_TIMEOUT:-10}

iosets_log() { logger -t iosets-slurm -- "$*" 2>/dev/null; echo "iosets-slurm: $*" >&2; }

# iosets_request: prints "priority P", "auto" or nothing, from the job's comment; returns 1 (and
# logs) when the comment asks for something malformed.
iosets_request() {
  comment=$(scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null | sed -n 's/.* Comment=\(.*\)/\1/p' \
    | sed 's/ [A-Z][A-Za-z]*=.*//')
  for word in $(printf '%s' "$comment" | tr ',;' '  '); do
    case "$word" in
      io-auto) echo auto; return 0 ;;
      io-priority=*)
        p=${word#io-priority=}
        # A finite positive decimal number: digits, one optional point, optional exponent.
        if printf '%s' "$p" | grep -Eq '^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$' \
          && awk -v p="$p" 'BEGIN { exit !(p + 0 > 0 && p + 0 < 1e308) }'; then
          echo "priority $p"
          return 0
        fi
        iosets_log "job $SLURM_JOB_ID: comment io-priority=$p is not a finite positive number"
        return 1
        ;;
    esac
  done
}

# iosets_write VALUE: writes VALUE (a number or `clear`) to the job's priority file.
iosets_write() {
  f=$IOSETS_MOUNT/.iosets/jobs/$SLURM_JOB_ID/priority
  if timeout -k 2 "$IOSETS_TIMEOUT" sh -c 'printf "%s\n" "$1" > "$2"' sh "$1" "$f" 2>/dev/null; then
    return 0
  fi
  iosets_log "job $SLURM_JOB_ID: writing '$1' to $f failed (is $IOSETS_MOUNT an iosets mount?)"
  return 1
}

# iosets_exit STATUS: the script's exit status under IOSETS_ON_ERROR.
iosets_exit() {
  if [ "$1" != 0 ] && [ "$IOSETS_ON_ERROR" = fail ]; then exit 1; fi
  exit 0
}
