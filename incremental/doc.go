// Package incremental will hold the event-driven IPVS controller that renders
// only the services touched since the last Sync and applies their delta.
package incremental
