// Package scripts holds the checks of what the Makefile's targets run on
// the host: its tests parse the Makefile and every script under scripts/
// (mvdan.cc/sh) and fail when a target runs a command that is on no fresh
// Debian machine and that no installer the target runs (make deps and
// deps-vm: scripts/deps.sh; make kind-deps: scripts/kinddeps.sh) names
// with its package, so a missing install step fails here before it fails
// a user; and when scripts/kubebin.sh's module drifts below the
// workspace's dependency versions, so that make test would compile
// client-go and its dependencies twice.
package scripts
