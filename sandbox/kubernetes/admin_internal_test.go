//go:build kubernetes

package kubernetes

import "testing"

// A workspace's use is believed only from a file system made for its claim:
// a little smaller (metadata, reserve) up to a little larger (rounded up);
// a claim on a shared disk reports the whole disk.
func TestOwnFileSystem(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		size, claim int64
		want        bool
	}{
		{2 * gib, 2 * gib, true},
		{2*gib - 120<<20, 2 * gib, true}, // ext4 on a 2 GiB volume
		{2*gib + 100<<20, 2 * gib, true}, // rounded up by the provisioner
		{250 * gib, 2 * gib, false},      // hostPath, local-path: the node's disk
		{gib, 2 * gib, false},            // smaller than its claim: not made for it
		{2 * gib, 0, false},              // no claim size known
	} {
		if got := ownFileSystem(tc.size, tc.claim); got != tc.want {
			t.Errorf("ownFileSystem(%d, %d) = %v, want %v", tc.size, tc.claim, got, tc.want)
		}
	}
}
