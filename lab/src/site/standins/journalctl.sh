#!/bin/sh
# Lab stand-in for journalctl(1) (systemd) on lab node @NODE@: the node's journal since boot at
# priority err and worse is its fixture (@FIXTURE@/state/journal): a few benign lines a real
# XE9680 on RHCOS logs, none a hardware fault. Takes the options host prep passes
# (-b, -p err, --no-pager, -q, -o short, --since, -k) and prints that journal; -p with a
# priority below err (warning, notice, info, debug) is refused rather than answered wrongly.
# Written by `bootstrap-lab` (lab/src/site/standins/journalctl.sh); docs/lab.md, "SSH hosts".
set -u
JOURNAL=@FIXTURE@/state/journal
prio=""
while [ $# -gt 0 ]; do
  case "$1" in
    -p|--priority) prio="${2:-}"; shift ;;
    -p*) prio="${1#-p}" ;;
    --priority=*) prio="${1#--priority=}" ;;
    -o|--output|--since|-S|-u|--unit) shift ;;
    -b|--boot|-q|--quiet|--no-pager|-k|--dmesg|-x|-a|--output=*|--since=*|--unit=*) ;;
    *) echo "journalctl: this lab node's stand-in does not take '$1'" >&2; exit 1 ;;
  esac
  shift
done
case "$prio" in
  err|3|crit|2|alert|1|emerg|0|0..3|emerg..err) ;;
  *) echo "journalctl: this lab node keeps only its err-and-worse journal; use -p err" >&2; exit 1 ;;
esac
case "$prio" in
  err|3|0..3|emerg..err) cat "$JOURNAL" ;;
esac
