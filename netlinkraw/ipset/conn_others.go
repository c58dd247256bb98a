//go:build !linux

package ipset

import "errors"

// Dial reports that ipset exists only on Linux.
func Dial(cfg *Config) (*Conn, error) {
	return nil, &OpError{Op: "dial", Object: "nfnetlink", Err: errors.New("ipset is only available on Linux")}
}
