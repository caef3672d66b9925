#!/bin/sh
# Lab stand-in for chronyc(1) (chrony 4.x) on lab node @NODE@: the lab's nodes run no NTP
# daemon, so this answers the two reports host prep reads, `chronyc -n -c tracking` and
# `chronyc -n -c sources`, in chrony's CSV format, as a node synchronized to the inventory's
# networks.ntp sources (@NTP@) would. Anything else fails as chronyc does for an unknown command.
# Written by `bootstrap-lab` (lab/src/site/standins/chronyc.sh); docs/lab.md, "SSH hosts".
set -u
SOURCES="@NTP@"
csv=0
cmd=""
for arg in "$@"; do
  case "$arg" in
    -n) ;;
    -c) csv=1 ;;
    -*) echo "chronyc: invalid option -- '${arg#-}'" >&2; exit 1 ;;
    *) [ -z "$cmd" ] && cmd="$arg" ;;
  esac
done
first=${SOURCES%% *}
case "$cmd" in
  tracking)
    # chrony's reference ID for an IPv4 source is its address in hex (in the shell itself:
    # host prep asks every node twice, and a lab's nodes share the machine's cores).
    refid=7F7F0101
    saved_ifs=$IFS; IFS=.; set -f; set -- $first; set +f; IFS=$saved_ifs
    if [ $# -eq 4 ]; then
      case "$1$2$3$4" in
        *[!0-9]*) ;;
        *) refid=$(printf '%02X%02X%02X%02X' "$1" "$2" "$3" "$4") ;;
      esac
    fi
    now=$(date +%s)
    if [ "$csv" = 1 ]; then
      echo "$refid,$first,3,$now.104728370,-0.000012402,0.000003115,0.000021874,-11.482,0.002,0.038,0.000412851,0.000193622,64.4,Normal"
    else
      cat <<OUT
Reference ID    : $refid ($first)
Stratum         : 3
Ref time (UTC)  : $(date -u -d "@$now" '+%a %b %d %H:%M:%S %Y')
System time     : 0.000012402 seconds fast of NTP time
Last offset     : +0.000003115 seconds
RMS offset      : 0.000021874 seconds
Frequency       : 11.482 ppm slow
Residual freq   : +0.002 ppm
Skew            : 0.038 ppm
Root delay      : 0.000412851 seconds
Root dispersion : 0.000193622 seconds
Update interval : 64.4 seconds
Leap status     : Normal
OUT
    fi
    ;;
  sources)
    state='*'
    for s in $SOURCES; do
      if [ "$csv" = 1 ]; then
        echo "^,$state,$s,2,6,377,33,0.000003115,0.000002870,0.000412851"
      else
        echo "^$state $s  2   6   377    33   +3115ns[+2870ns] +/-  413us"
      fi
      state='+'
    done
    ;;
  "") echo "chronyc: interactive mode is not available on this lab node" >&2; exit 1 ;;
  *) echo "Unrecognized command" >&2; exit 1 ;;
esac
