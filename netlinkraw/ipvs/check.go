package ipvs

import (
	"fmt"
	"strings"

	uapi "github.com/proxysinks/proxysinks/netlinkraw/internal/ipvsuapi"
)

// errInvalid marks client-side validation errors; they wrap EINVAL so that
// callers can treat them like the kernel's.
type invalidError struct{ msg string }

func (e *invalidError) Error() string { return "invalid argument: " + e.msg }

func invalidf(format string, a ...any) error {
	return &invalidError{fmt.Sprintf(format, a...)}
}

// Is makes errors.Is(err, unix.EINVAL) hold.
func (e *invalidError) Is(target error) bool { return target == errEINVAL }

// service is a validated service ready to encode: the service (not
// copied: encoding is on the hot path) and its family.
type service struct {
	*Service
	family Family
}

// checkService validates s. full is set for create and update, which send
// every attribute.
func checkService(s *Service, full bool) (service, error) {
	n := service{Service: s, family: s.Family}
	if s.FWMark != 0 {
		if s.Protocol != 0 || s.Address.IsValid() || s.Port != 0 {
			return n, invalidf("a firewall-mark service has no protocol, address or port")
		}
		if s.Family != IPv4 && s.Family != IPv6 {
			return n, invalidf("a firewall-mark service needs Family IPv4 or IPv6")
		}
	} else {
		if !s.Address.IsValid() {
			return n, invalidf("service has neither an address nor a firewall mark")
		}
		if s.Address.Zone() != "" {
			return n, invalidf("service address %s has a zone", s.Address)
		}
		af := familyOf(s.Address)
		if n.family == 0 {
			n.family = af
		}
		if n.family != af {
			return n, invalidf("service address %s is not %s", s.Address, n.family)
		}
	}
	if !full {
		return n, nil
	}
	if len(s.Scheduler) > uapi.SchedNameMax || strings.IndexByte(s.Scheduler, 0) >= 0 {
		return n, invalidf("scheduler name %q longer than %d bytes or with a NUL", s.Scheduler, uapi.SchedNameMax)
	}
	if len(s.PEName) > uapi.PENameMax || strings.IndexByte(s.PEName, 0) >= 0 {
		return n, invalidf("persistence engine name %q longer than %d bytes or with a NUL", s.PEName, uapi.PENameMax)
	}
	if int(s.Netmask) > n.family.bits() {
		return n, invalidf("netmask /%d longer than a %s address", s.Netmask, n.family)
	}
	return n, nil
}

// destination is a validated destination ready to encode.
type destination struct {
	*Destination
	family Family
}

func checkDestination(d *Destination) (destination, error) {
	n := destination{Destination: d, family: d.Family}
	if !d.Address.IsValid() {
		return n, invalidf("destination has no address")
	}
	if d.Address.Zone() != "" {
		return n, invalidf("destination address %s has a zone", d.Address)
	}
	af := familyOf(d.Address)
	if n.family == 0 {
		n.family = af
	}
	if n.family != af {
		return n, invalidf("destination address %s is not %s", d.Address, n.family)
	}
	return n, nil
}
