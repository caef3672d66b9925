#!/bin/sh
# Lab stand-in for modprobe(8) (kmod) on lab node @NODE@: this machine loads no kernel module
# for a lab node, so the node's loaded modules are its fixture's /proc/modules
# (@FIXTURE@/proc/modules), which this edits in place. `modprobe NAME [PARAM=VALUE...]` loads a
# module it knows (appends its line), `modprobe -r NAME` unloads one no other module uses;
# unknown names, missing root and modules in use fail with modprobe's own messages.
# Written by `bootstrap-lab` (lab/src/site/standins/modprobe.sh); docs/lab.md, "SSH hosts".
set -u
MODULES=@FIXTURE@/proc/modules
# The modules this node's kernel has, with their sizes.
KNOWN="irdma:409600 ice:1150976 mlx5_core:2543616 mlx5_ib:499712 ib_core:507904 ib_uverbs:200704
nvidia:54288384 nvidia_uvm:6426624 nvidia_modeset:1638400 nvidia_drm:122880 nvidia_peermem:16384
br_netfilter:32768 overlay:200704 nvme:57344 nvme_core:212992 virtio_blk:28672 8021q:45056
bonding:258048 vfio_pci:16384 rdma_cm:147456 ip_vs:204800 nf_conntrack:200704 dummy:12288"
remove=0
quiet=0
name=""
for arg in "$@"; do
  case "$arg" in
    -r|--remove) remove=1 ;;
    -q|--quiet) quiet=1 ;;
    -*) echo "modprobe: unrecognized option '$arg'" >&2; exit 1 ;;
    *) [ -z "$name" ] && name=$(echo "$arg" | tr - _) ;;
  esac
done
[ -n "$name" ] || { echo "modprobe: ERROR: missing parameters. See -h." >&2; exit 1; }
size=""
for k in $KNOWN; do [ "${k%%:*}" = "$name" ] && size=${k#*:}; done
loaded=$(awk -v m="$name" '$1 == m { print "yes" }' "$MODULES")
if [ "$remove" = 1 ]; then
  if [ -z "$loaded" ]; then
    if [ -n "$size" ]; then
      [ "$quiet" = 1 ] || echo "modprobe: FATAL: Module $name is not in kernel." >&2
    else
      [ "$quiet" = 1 ] || echo "modprobe: FATAL: Module $name not found." >&2
    fi
    exit 1
  fi
  users=$(awk -v m="$name" '$1 == m { print $4 }' "$MODULES")
  if [ "$users" != "-" ]; then
    echo "modprobe: FATAL: Module $name is in use." >&2; exit 1
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "modprobe: ERROR: could not remove '$name': Operation not permitted" >&2; exit 1
  fi
  # The module goes, and with it its use by the modules it depended on.
  kept=$(awk -v m="$name" '$1 != m {
    n = split($4, users, ","); left = ""; dropped = 0
    for (i = 1; i <= n; i++) if (users[i] != "") { if (users[i] == m) dropped = 1; else left = left users[i] "," }
    if (dropped) { $3 = $3 - 1; $4 = (left == "" ? "-" : left) }
    print }' "$MODULES")
  printf '%s\n' "$kept" > "$MODULES"
  exit 0
fi
if [ -z "$size" ]; then
  [ "$quiet" = 1 ] || echo "modprobe: FATAL: Module $name not found in directory /lib/modules/$(uname -r)" >&2
  exit 1
fi
[ -n "$loaded" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "modprobe: ERROR: could not insert '$name': Operation not permitted" >&2; exit 1
fi
echo "$name $size 0 - Live 0x0000000000000000" >> "$MODULES"
