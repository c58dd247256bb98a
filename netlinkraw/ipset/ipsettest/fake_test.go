package ipsettest_test

import (
	"testing"

	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset/ipsettest"
)

func TestContractFake(t *testing.T) {
	ipsettest.Contract(t, func(t *testing.T) ipset.Client { return ipsettest.New() }, ipsettest.Options{})
}
