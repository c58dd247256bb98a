package file

import (
	"context"
	"errors"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/nodelocal"
)

// reload re-reads changed files and applies the objects that changed.
func (s *Source) reload(ctx context.Context, retried bool) error {
	paths, problems, err := s.paths()
	if err == nil && len(paths) == 0 {
		err = &client.ObjectError{Source: s.cfg.Path, Err: ErrNoManifests}
	}
	if err != nil {
		// Nothing can be trusted: nothing changes.
		oe, ok := err.(*client.ObjectError)
		if !ok {
			oe = &client.ObjectError{Source: s.cfg.Path, Err: err}
		}
		s.problems = []*client.ObjectError{oe}
		return err
	}
	seen := make(map[string]bool, len(paths))
	complete := true // every file read, every document identified
	for _, p := range paths {
		seen[p] = true
		bad, err := s.readManifest(ctx, p)
		if err != nil {
			return err
		}
		problems = append(problems, bad...)
		complete = complete && len(bad) == 0
	}
	for p := range s.files {
		if !seen[p] {
			delete(s.files, p)
		}
	}
	s.problems = problems
	if complete {
		s.trusted = true
	}

	want := s.wanted(paths)
	// A winning definition whose decoded object was already dropped (an
	// overriding definition went away): decode its file again.
	if !retried {
		if p, ok := s.dropped(paths, want); ok {
			delete(s.files, p)
			return s.reload(ctx, true)
		}
	}
	s.applyWanted(want)
	if len(problems) == 0 {
		return nil
	}
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = p
	}
	return fmt.Errorf("file source: %w", errors.Join(errs...))
}

// readManifest reads the manifest file p into s.files unless its content
// is unchanged, and returns what of it cannot be read: the whole file (it
// keeps its last good content) or the documents that are not Kubernetes
// objects (the objects of its earlier content stay meanwhile, see
// fileState.kept). The error is ctx's, when it ended.
func (s *Source) readManifest(ctx context.Context, p string) ([]*client.ObjectError, error) {
	data, err := readFile(ctx, p, s.cfg.MaxFileSize)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return []*client.ObjectError{fileError(p, err)}, nil
	}
	fileSum := hashBytes(data)
	var prev chunkCache
	old := s.files[p]
	if old != nil {
		if old.sum == fileSum {
			return old.bad, nil
		}
		prev = old.chunks
	}
	pr, err := parseFn(p, data, prev, s.opts)
	if err == nil && pr.empty() {
		err = ErrEmpty
	}
	if err != nil {
		var oe *client.ObjectError
		if errors.As(err, &oe) {
			return []*client.ObjectError{oe}, nil
		}
		return []*client.ObjectError{fileError(p, err)}, nil
	}
	fs := &fileState{sum: fileSum, docs: pr.docs, chunks: pr.cache, bad: pr.bad}
	if len(pr.bad) > 0 && old != nil {
		fs.kept = keptDocs(old, pr.docs)
	}
	s.files[p] = fs
	return pr.bad, nil
}

// fileError is the problem of a file that cannot be read or split: the
// file is the Source, so an *os.PathError's path is not repeated.
func fileError(p string, err error) *client.ObjectError {
	var pe *os.PathError
	if errors.As(err, &pe) && pe.Path == p {
		err = fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return &client.ObjectError{Source: p, Err: err}
}

// wanted returns the objects the files define: later definitions (in path,
// then document order) override earlier ones, with a warning when they
// differ.
func (s *Source) wanted(paths []string) map[ref]*doc {
	n := 0
	for _, fs := range s.files {
		n += len(fs.docs) + len(fs.kept)
	}
	want := make(map[ref]*doc, n) // sized: growing it was 10% of a first load
	for _, p := range paths {
		fs := s.files[p]
		if fs == nil {
			continue
		}
		for _, list := range [][]doc{fs.docs, fs.kept} {
			for i := range list {
				d := &list[i]
				if prev, dup := want[d.ref]; dup && prev.sum != d.sum {
					s.log.Warn("object defined twice; using the later definition", "kind", d.ref.kind,
						"namespace", d.ref.namespace, "name", d.ref.name,
						"defined", fmt.Sprintf("%s#%d and %s#%d", prev.in, prev.at, d.in, d.at),
						"using", fmt.Sprintf("%s#%d", d.in, d.at))
				}
				want[d.ref] = d
			}
		}
	}
	return want
}

// dropped returns the first file holding a wanted definition that is not
// applied yet but whose decoded object was dropped already (it was
// applied once, then overridden by a definition that went away).
func (s *Source) dropped(paths []string, want map[ref]*doc) (string, bool) {
	for _, p := range paths {
		fs := s.files[p]
		if fs == nil {
			continue
		}
		for i := range fs.docs {
			d := &fs.docs[i]
			old, ok := s.applied[d.ref]
			if want[d.ref] == d && d.obj == nil && d.err == nil && (!ok || old != d.sum) {
				return p, true
			}
		}
	}
	return "", false
}

// applyWanted removes the objects no longer wanted and applies the wanted
// ones that changed.
func (s *Source) applyWanted(want map[ref]*doc) {
	for r := range s.applied {
		if _, ok := want[r]; !ok {
			s.remove(r)
		}
	}
	applied := make(map[ref]sum, len(want))
	for r, d := range want {
		applied[r] = d.sum
		if old, ok := s.applied[r]; ok && old == d.sum {
			continue
		}
		s.apply(d)
	}
	s.applied = applied
}

// keptDocs returns the objects of a file's earlier content (old) that its
// new content (docs) does not define.
func keptDocs(old *fileState, docs []doc) []doc {
	defined := make(map[ref]bool, len(docs))
	for _, d := range docs {
		defined[d.ref] = true
	}
	var kept []doc
	for _, list := range [][]doc{old.docs, old.kept} {
		for _, d := range list {
			if !defined[d.ref] {
				defined[d.ref] = true
				kept = append(kept, d)
			}
		}
	}
	return kept
}

// apply gives one wanted object to the state.
func (s *Source) apply(d *doc) {
	if d.err != nil {
		// Decoding failed: the object is skipped (its earlier version, if
		// any, goes away) and counted.
		s.remove(d.ref)
		s.state.Invalid(d.err)
		return
	}
	o := d.obj
	d.obj = nil // applied: the state holds what it needs
	switch o := o.(type) {
	case *nodelocal.ConvertedService:
		_ = s.state.SetConvertedService(o) // the state logs and counts errors
	case *nodelocal.ParsedSlice:
		_ = s.state.SetParsedSlice(o)
	case *corev1.Service: // the old decoder, in the benchmark
		_ = s.state.SetService(o)
	case *discoveryv1.EndpointSlice:
		_ = s.state.SetSlice(o)
	case *corev1.Node:
		s.state.SetNode(o)
	case *nodelocal.ParsedServiceCIDR:
		_ = s.state.SetParsedServiceCIDR(o)
	case *networkingv1.ServiceCIDR:
		_ = s.state.SetServiceCIDR(o)
	}
}

// remove takes an object that is no longer defined from the state.
func (s *Source) remove(r ref) {
	switch r.kind {
	case "Service":
		s.state.DeleteService(r.namespace, r.name)
	case "EndpointSlice":
		s.state.DeleteSlice(r.namespace, r.name)
	case "Node":
		s.state.DeleteNode(r.name)
	case "ServiceCIDR":
		s.state.DeleteServiceCIDR(r.name)
	}
}

// parseFn is parseFile; the benchmark swaps in the old decoder as its
// baseline.
var parseFn = parseConverted
