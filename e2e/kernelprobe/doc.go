// Package kernelprobe holds tests that show a static Go binary in the test VM
// reaches the kernel's IPVS generic-netlink family. It has no code of its own.
package kernelprobe
