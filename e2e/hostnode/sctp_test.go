package hostnode

import "golang.org/x/sys/unix"

// probeSCTP reports whether the kernel can open SCTP sockets.
func probeSCTP() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}
