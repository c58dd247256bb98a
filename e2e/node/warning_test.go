package node

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Without br_netfilter calling iptables, pods on the bridge would not get
// replies from backends on the same bridge: the sink says so at start, and
// is silent when it is on.
func TestBridgeNetfilterWarning(t *testing.T) {
	requireIPVS(t)
	const warning = "bridge-nf-call-iptables is not 1"
	for _, on := range []bool{true, false} {
		c := newCluster(t)
		if !on {
			c.node.MustRun(t, "sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=0")
		}
		c.write(nodeManifest)
		c.startSink()
		c.eventually(20*time.Second, func() error {
			if !strings.Contains(c.sinkLog.String(), "node ready") {
				return fmt.Errorf("sink not ready yet")
			}
			return nil
		})
		if got := strings.Contains(c.sinkLog.String(), warning); got == on {
			t.Errorf("bridge-nf-call-iptables=%v: warning logged = %v\n%s", on, got, c.sinkLog.String())
		}
		c.stopAll()
	}
}
