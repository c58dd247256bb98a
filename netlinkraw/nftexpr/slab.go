package nftexpr

import "github.com/proxysinks/proxysinks/netlinkraw/nft"

// slab hands out the bytes and verdicts of compiled objects from larger
// chunks, so that compiling an element or a rule costs no allocation of
// its own (a 10,000-service table has about 150,000 elements). A chunk
// lives as long as any object carved from it.
type slab struct {
	b []byte
	v []nft.Verdict
}

const (
	slabBytes    = 32 << 10
	slabVerdicts = 512
)

// bytes returns an empty slice with room for n bytes (appending more
// reallocates it rather than overrunning the next object).
func (s *slab) bytes(n int) []byte {
	if cap(s.b)-len(s.b) < n {
		s.b = make([]byte, 0, max(slabBytes, n))
	}
	i := len(s.b)
	s.b = s.b[:i+n]
	return s.b[i : i : i+n]
}

// verdict returns a pointer to a copy of v.
func (s *slab) verdict(v nft.Verdict) *nft.Verdict {
	if len(s.v) == cap(s.v) {
		s.v = make([]nft.Verdict, 0, slabVerdicts)
	}
	s.v = append(s.v, v)
	return &s.v[len(s.v)-1]
}
