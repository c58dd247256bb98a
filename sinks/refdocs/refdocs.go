// Package refdocs generates the reference pages under docs/reference from
// the sinks' code: every metric each sink binary serves (metrics.md), every
// flag (flags.md) and every KubeProxyConfiguration field and feature gate
// (config.md). `make docs` writes them; the package's test fails when a
// checked-in page differs from what the code generates.
package refdocs

import (
	"fmt"
	"strings"

	"github.com/proxysinks/proxysinks/sinks/iptablessink"
	"github.com/proxysinks/proxysinks/sinks/ipvssink"
	"github.com/proxysinks/proxysinks/sinks/nftablessink"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

// Sinks returns the sinks of the binaries under sinks/, built as each
// main.go builds its own (without the usage line); a test keeps the list
// whole.
func Sinks() []runtime.Sink {
	return []runtime.Sink{
		ipvssink.Sink("ipvs-fullstate", "", ipvssink.FullState),
		ipvssink.Sink("ipvs-incremental", "", ipvssink.Incremental),
		iptablessink.Sink("iptables", ""),
		nftablessink.Sink("nftables", ""),
	}
}

// Page is a generated page: its path under the repository's root and its
// content.
type Page struct {
	Path    string
	Content string
}

// Command is what regenerates the pages.
const Command = "make docs"

// Pages returns every generated page of the sinks.
func Pages(sinks []runtime.Sink) ([]Page, error) {
	var pages []Page
	for _, p := range []struct {
		path   string
		render func([]runtime.Sink) (string, error)
	}{{"docs/reference/flags.md", FlagsPage}, {"docs/reference/metrics.md", MetricsPage}, {"docs/reference/config.md", ConfigPage}} {
		content, err := p.render(sinks)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.path, err)
		}
		pages = append(pages, Page{Path: p.path, Content: content})
	}
	return pages, nil
}

// header is a generated page's first lines: its title and what generates
// it.
func header(title string) string {
	return "# " + title + "\n\n<!-- Generated from the code by `" + Command + "` (sinks/refdocs); do not edit. -->\n\n"
}

// row is one Markdown table row of cells (pipes escaped).
func row(cells ...string) string {
	for i, c := range cells {
		cells[i] = strings.ReplaceAll(c, "|", `\|`)
	}
	return "| " + strings.Join(cells, " | ") + " |\n"
}
