// Package kind holds the checks of the kind conformance kit
// (scripts/kind-e2e.sh, make kind-deps and make kind-e2e; e2e/README.md,
// "kind conformance"): e2e/scripts' TestInstalledCommands parses the kit's
// shell scripts and fails when one runs a host command that make kind-deps
// (scripts/kinddeps.sh) does not install. The directory holds the node
// image's files (node/) and the runc wrapper (runcnocap/).
package kind
