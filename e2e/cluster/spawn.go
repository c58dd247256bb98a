package cluster

import (
	"os/exec"
	"runtime"
)

// spawner starts a cluster's components from one OS thread that lives as
// long as the cluster. The components get SIGKILL when their parent dies
// (Pdeathsig), so that a test binary that crashes or times out leaves no
// etcd or apiserver behind; but Linux sends it when the thread that
// forked the child exits, not the process, and Go ends a thread whose
// goroutine exits while locked to it (nstest.NetNS.Do does, after setns).
// A component started from an arbitrary thread was killed whenever that
// thread later ran such a goroutine: the apiserver lost etcd in the middle
// of a test.
type spawner struct {
	reqs chan func()
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan func())}
	go func() {
		// Never unlocked: the thread ends with this goroutine, when
		// close has been called after every component stopped.
		runtime.LockOSThread()
		for f := range s.reqs {
			f()
		}
	}()
	return s
}

// start starts cmd from the spawner's thread.
func (s *spawner) start(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	s.reqs <- func() { errc <- cmd.Start() }
	return <-errc
}

// close ends the spawner's thread; the components it started must have
// exited.
func (s *spawner) close() { close(s.reqs) }
