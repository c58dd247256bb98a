package ipvssink

import (
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/fullstate"
)

// fullStateController adapts the full-state controller to the runner.
type fullStateController struct{ c *fullstate.Controller }

func (f fullStateController) Snapshot(s *client.Snapshot) { client.ToCallback(f.c.Callback)(s) }

func (f fullStateController) Resync() dataplane.SyncStats { return f.c.Resync() }

// FullState builds the IPVS full-state controller (the ipvs-fullstate sink).
func FullState(d Deps) Controller {
	var reader fullstate.Reader
	if d.Reader != nil {
		reader = d.Reader
	}
	c := fullstate.NewController(d.Render, d.Applier, reader, d.Log)
	c.OnSync = d.OnSync
	return fullStateController{c}
}
