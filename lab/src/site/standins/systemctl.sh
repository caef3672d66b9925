#!/bin/sh
# Lab stand-in for systemctl(1) (systemd) on lab node @NODE@: this machine runs no systemd in a
# lab node, so units are files: @FIXTURE@/state/systemd/UNIT/active ("active" or "inactive") and
# .../enabled ("enabled" or "disabled"). The units present: chronyd, sshd, kubelet, crio.
# Answers is-active, is-enabled, show, start, stop, restart, reload, enable, disable and
# daemon-reload with systemctl's output and exit codes; changing state needs root, as with
# systemd's polkit default for a user without a session. Nothing runs or stops.
# Written by `bootstrap-lab` (lab/src/site/standins/systemctl.sh); docs/lab.md, "SSH hosts".
set -u
UNITS=@FIXTURE@/state/systemd
quiet=0
verb=""
names=""
for arg in "$@"; do
  case "$arg" in
    -q|--quiet) quiet=1 ;;
    --no-pager|--no-ask-password|--system|--no-block|--no-legend|-l|--full|--plain|--all|-a|--type=*) ;;
    -*) echo "systemctl: unrecognized option '$arg'" >&2; exit 1 ;;
    *) if [ -z "$verb" ]; then verb="$arg"; else names="$names ${arg%.service}"; fi ;;
  esac
done
say() { [ "$quiet" = 1 ] || echo "$1"; }
need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "Failed to $1 $2.service: Interactive authentication required." >&2
    exit 1
  fi
}
exists() {
  if [ ! -d "$UNITS/$2" ]; then
    echo "Failed to $1 $2.service: Unit $2.service not found." >&2
    exit 5
  fi
}
case "$verb" in
  daemon-reload) need_root reload daemon; exit 0 ;;
  is-active|is-enabled|show|start|stop|restart|reload|enable|disable) ;;
  "") echo "systemctl: this lab node's stand-in lists no units; name a verb" >&2; exit 1 ;;
  *) echo "Unknown command verb $verb." >&2; exit 1 ;;
esac
[ -n "$names" ] || { echo "Too few arguments." >&2; exit 1; }
rc=0
for u in $names; do
  case "$verb" in
    is-active)
      s=$(cat "$UNITS/$u/active" 2>/dev/null || echo inactive)
      say "$s"; [ "$s" = active ] || rc=3 ;;
    is-enabled)
      if [ ! -d "$UNITS/$u" ]; then
        echo "Failed to get unit file state for $u.service: No such file or directory" >&2; rc=1
      else
        s=$(cat "$UNITS/$u/enabled"); say "$s"; [ "$s" = enabled ] || rc=1
      fi ;;
    show)
      if [ -d "$UNITS/$u" ]; then
        a=$(cat "$UNITS/$u/active"); e=$(cat "$UNITS/$u/enabled")
        if [ "$a" = active ]; then sub=running; else sub=dead; fi
        printf 'Id=%s.service\nNames=%s.service\nLoadState=loaded\nActiveState=%s\nSubState=%s\nUnitFileState=%s\n' "$u" "$u" "$a" "$sub" "$e"
      else
        printf 'Id=%s.service\nNames=%s.service\nLoadState=not-found\nActiveState=inactive\nSubState=dead\nUnitFileState=\n' "$u" "$u"
      fi ;;
    start|restart|reload)
      need_root "$verb" "$u"; exists "$verb" "$u"; echo active > "$UNITS/$u/active" ;;
    stop)
      need_root stop "$u"; exists stop "$u"; echo inactive > "$UNITS/$u/active" ;;
    enable|disable)
      need_root "$verb" "$u"; exists "$verb" "$u"
      link="/etc/systemd/system/multi-user.target.wants/$u.service"
      old=$(cat "$UNITS/$u/enabled")
      if [ "$verb" = enable ] && [ "$old" != enabled ]; then
        echo enabled > "$UNITS/$u/enabled"
        echo "Created symlink $link → /usr/lib/systemd/system/$u.service." >&2
      elif [ "$verb" = disable ] && [ "$old" != disabled ]; then
        echo disabled > "$UNITS/$u/enabled"
        echo "Removed \"$link\"." >&2
      fi ;;
  esac
done
exit $rc
