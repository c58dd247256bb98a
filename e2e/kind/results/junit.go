package main

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// State is what became of one spec in one run.
type State string

// The states of a spec in a run's JUnit report.
const (
	Passed  State = "passed"
	Failed  State = "failed"
	Skipped State = "skipped" // skipped while running (Skip: too few nodes, a missing feature)
	Absent  State = ""        // not selected by the run's focus and skip
)

// Spec is one selected spec of a run: its state, and why it was skipped or
// failed (the first line of the message).
type Spec struct {
	State  State
	Reason string
}

// Run is one make kind-e2e run: its JUnit report, read.
type Run struct {
	// Name is the run's directory under the results root (the sink, or
	// kube-proxy-<mode>).
	Name string
	// Report is the JUnit file's path as given.
	Report string
	// Focus and Skip are e2e.test's --ginkgo.focus and --ginkgo.skip.
	Focus, Skip string
	// Nodes is the cluster's node count from the run's cluster.yaml (0: unknown).
	Nodes int
	// Seconds is the suite's run time.
	Seconds float64
	// Specs are the selected specs by name (ginkgo's full text without "[It] ").
	Specs map[string]Spec
}

// Count returns how many selected specs of the run are in state s.
func (r Run) Count(s State) int {
	n := 0
	for _, sp := range r.Specs {
		if sp.State == s {
			n++
		}
	}
	return n
}

type junitSuites struct {
	Suites []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Time       float64         `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name    string        `xml:"name,attr"`
	Status  string        `xml:"status,attr"`
	Skipped *junitMessage `xml:"skipped"`
	Failure *junitMessage `xml:"failure"`
	Error   *junitMessage `xml:"error"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// reason is the message, or (ginkgo leaves the attribute empty) the first
// line of the text without ginkgo's "[FAILED] ".
func (m *junitMessage) reason() string {
	if m.Message != "" {
		return firstLine(m.Message)
	}
	return strings.TrimPrefix(firstLine(m.Text), "[FAILED] ")
}

// filteredOut is ginkgo's message for a spec its focus or skip left out; a
// spec skipped while running has "skipped - <reason>".
const filteredOut = "skipped"

// ReadRun reads the JUnit report of the run in dir (junit_01.xml) and the
// node count of its cluster.yaml.
func ReadRun(dir string) (Run, error) {
	report := filepath.Join(dir, "junit_01.xml")
	b, err := os.ReadFile(report)
	if err != nil {
		return Run{}, fmt.Errorf("read the JUnit report of run %s: %w", dir, err)
	}
	r, err := ParseReport(b)
	if err != nil {
		return Run{}, fmt.Errorf("parse %s: %w", report, err)
	}
	r.Name, r.Report = filepath.Base(dir), report
	if cfg, err := os.ReadFile(filepath.Join(dir, "cluster.yaml")); err == nil {
		r.Nodes = strings.Count(string(cfg), "- role:")
	}
	return r, nil
}

// ParseReport reads a ginkgo v2 JUnit report of e2e.test: the selected
// specs (not the suite's setup nodes, not the specs the focus or skip left
// out) with their states.
func ParseReport(b []byte) (Run, error) {
	var s junitSuites
	if err := xml.Unmarshal(b, &s); err != nil {
		return Run{}, err
	}
	if len(s.Suites) != 1 {
		return Run{}, fmt.Errorf("%d test suites, want 1", len(s.Suites))
	}
	suite := s.Suites[0]
	r := Run{Seconds: suite.Time, Specs: map[string]Spec{}}
	for _, p := range suite.Properties {
		switch p.Name {
		case "FocusStrings":
			r.Focus = p.Value
		case "SkipStrings":
			r.Skip = p.Value
		}
	}
	for _, c := range suite.Cases {
		name, ok := strings.CutPrefix(c.Name, "[It] ")
		if !ok {
			continue // [SynchronizedBeforeSuite], [ReportAfterSuite] …
		}
		var sp Spec
		switch {
		case c.Failure != nil:
			sp = Spec{State: Failed, Reason: c.Failure.reason()}
		case c.Error != nil:
			sp = Spec{State: Failed, Reason: c.Error.reason()}
		case c.Skipped != nil:
			reason, ok := strings.CutPrefix(c.Skipped.Message, filteredOut+" - ")
			if !ok {
				continue
			}
			sp = Spec{State: Skipped, Reason: firstLine(reason)}
		case c.Status == "passed":
			sp = Spec{State: Passed}
		default:
			return Run{}, fmt.Errorf("spec %q: status %q", name, c.Status)
		}
		r.Specs[name] = sp
	}
	return r, nil
}

// maxReason bounds a reason's length in the page.
const maxReason = 200

// firstLine returns the first line of a message, at most maxReason bytes.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > maxReason {
		s = strings.ToValidUTF8(s[:maxReason], "") + "…"
	}
	return s
}
