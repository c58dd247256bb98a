package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"testing"
)

// TestHash16: hash16's inline base32 is encoding/base32's, on digests
// covering every value of every 5-bit group.
func TestHash16(t *testing.T) {
	for i := range 4096 {
		in := []byte(fmt.Sprintf("ns%d/svc:p%dtcp10.0.%d.%d:80", i%7, i, i/256, i%256))
		sum := sha256.Sum256(in)
		want := base32.StdEncoding.EncodeToString(sum[:])[:16]
		if got := hash16(in); string(got[:]) != want {
			t.Fatalf("hash16(%q) = %s, want %s", in, got[:], want)
		}
	}
}
