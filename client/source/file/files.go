package file

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/proxysinks/proxysinks/client"
)

// paths lists the manifest files of the path, and the entries named like
// manifests that are not regular files (a FIFO, a device: reading them
// could block or never end), as errors naming them.
func (s *Source) paths() ([]string, []*client.ObjectError, error) {
	fi, err := os.Stat(s.cfg.Path)
	if err != nil {
		return nil, nil, fmt.Errorf("file source: %w", err)
	}
	if !fi.IsDir() {
		return []string{s.cfg.Path}, nil, nil
	}
	entries, err := os.ReadDir(s.cfg.Path)
	if err != nil {
		return nil, nil, fmt.Errorf("file source: %w", err)
	}
	var out []string
	var skipped []*client.ObjectError
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") {
			continue
		}
		switch filepath.Ext(n) {
		case ".yaml", ".yml", ".json":
			p := filepath.Join(s.cfg.Path, n)
			fi, err := os.Stat(p) // follows symbolic links (ConfigMap volumes); never blocks
			switch {
			case err != nil:
				skipped = append(skipped, &client.ObjectError{Source: p, Err: err})
			case fi.IsDir():
			case !fi.Mode().IsRegular():
				skipped = append(skipped, &client.ObjectError{Source: p, Err: notRegular(fi)})
			default:
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out, skipped, nil
}

// ErrNotRegular is the error of a manifest path that is not a regular file
// (a FIFO, a device, a socket): it is not read.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is the error of a manifest file larger than
// Config.MaxFileSize.
var ErrTooLarge = errors.New("file too large")

// ErrEmpty is the error of a manifest file that holds no document (empty,
// only comments): it is not taken as "no objects"; an explicit empty List
// is.
var ErrEmpty = errors.New("reads as empty (no document; to serve nothing on purpose write an empty List: `apiVersion: v1`, `kind: List`, `items: []`)")

// ErrNoManifests is the error of a directory without any manifest file.
var ErrNoManifests = errors.New("no manifest file (*.yaml, *.yml, *.json)")

func notRegular(fi os.FileInfo) error {
	what := "special file"
	switch t := fi.Mode().Type(); {
	case t&os.ModeNamedPipe != 0:
		what = "FIFO"
	case t&os.ModeSocket != 0:
		what = "socket"
	case t&os.ModeCharDevice != 0:
		what = "character device"
	case t&os.ModeDevice != 0:
		what = "block device"
	}
	return fmt.Errorf("%w: a %s; skipped", ErrNotRegular, what)
}

// readFile reads a manifest file: a regular file of at most limit bytes,
// checking ctx between blocks. It opens without blocking (a FIFO would
// block the open until a writer comes).
func readFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(fi)
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%w: %d bytes, more than the limit of %d", ErrTooLarge, fi.Size(), limit)
	}
	const block = 4 << 20
	data := make([]byte, 0, fi.Size()+1)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(data) == cap(data) {
			data = slices.Grow(data, min(len(data)+1, block))
		}
		n, err := f.Read(data[len(data):min(cap(data), len(data)+block)])
		data = data[:len(data)+n]
		if int64(len(data)) > limit {
			return nil, fmt.Errorf("%w: more than the limit of %d bytes", ErrTooLarge, limit)
		}
		if errors.Is(err, io.EOF) {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
