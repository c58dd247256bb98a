package vm

// initScript is the guest's /init (busybox sh). It mounts the pseudo
// filesystems, links the tools, runs /job/cmd.sh from the per-run archive and
// prints the exit-status marker named in /job/env before powering off.
const initScript = `#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp /run /sbin /usr/bin /usr/sbin /etc /root
/bin/busybox ln -s /run /var/run 2>/dev/null
/bin/busybox --install -s /bin
export PATH=/job/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /dev/shm
for t in modprobe insmod rmmod lsmod modinfo depmod; do ln -sf /usr/bin/kmod /sbin/$t; done
for t in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
	ln -sf xtables-nft-multi /usr/sbin/$t
	ln -sf xtables-nft-multi /usr/sbin/$(echo $t | sed 's/tables/tables-nft/')
	ln -sf xtables-legacy-multi /usr/sbin/$(echo $t | sed 's/tables/tables-legacy/')
done
# busybox's shell runs its own applets before searching $PATH; these functions
# make the real tools win in the command's shell.
: > /etc/tools.sh
for t in ip modprobe insmod rmmod lsmod modinfo depmod; do
	for d in /usr/sbin /usr/bin /sbin; do
		if [ -e $d/$t ]; then echo "$t() { $d/$t \"\$@\"; }" >> /etc/tools.sh; break; fi
	done
done
echo 'root:x:0:0:root:/root:/bin/sh' > /etc/passwd
echo 'root:x:0:' > /etc/group
printf '127.0.0.1 localhost\n::1 localhost\n' > /etc/hosts
echo /sbin/modprobe > /proc/sys/kernel/modprobe
hostname proxysinks-vm
ip link set lo up
marker=PROXYSINKS-EXIT-STATUS
[ -f /job/env ] && . /job/env
if [ -d /job/work ]; then cd /job/work; else cd /tmp; fi
if [ -f /job/cmd.sh ]; then
	( . /etc/tools.sh; . /job/cmd.sh ) </dev/null
	rc=$?
else
	echo "vm: /job/cmd.sh missing from the initramfs"
	rc=127
fi
printf '\n%s=%d\n' "$marker" "$rc"
sync
poweroff -f
`
