package idletrim

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ReleaseProgram unmaps the program's own read-only pages from the
// process: its code and read-only data (the executable's r-xp and r--p
// mappings). Most of them were touched once, by the package inits at start,
// and stay resident for nothing: at idle they were three quarters of conch's
// resident memory. The pages stay in the page cache (shared with every other
// process running the same file: sandboxd in each sandbox); what runs again
// maps its pages back with a minor fault. A mapping holding private copies
// (Anonymous > 0: written to, a debugger's breakpoint) is left alone, since
// unmapping would drop the change. It does so only when at least atLeast
// bytes of them are resident (0: always), and returns how many were and
// whether it released them.
func ReleaseProgram(atLeast uint64) (resident uint64, released bool, err error) {
	exe, err := os.Stat("/proc/self/exe")
	if err != nil {
		return 0, false, fmt.Errorf("release program pages: %w", err)
	}
	ino := exe.Sys().(*syscall.Stat_t).Ino
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, false, fmt.Errorf("release program pages: %w", err)
	}
	ms := programMappings(smaps, ino)
	for _, m := range ms {
		if m.anon == 0 {
			resident += m.rss
		}
	}
	if resident < atLeast {
		return resident, false, nil
	}
	for _, m := range ms {
		if m.anon > 0 {
			continue
		}
		// The addresses are the kernel's, not Go pointers: madvise takes them as they are.
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, m.start, m.end-m.start, syscall.MADV_DONTNEED); errno != 0 {
			return resident, false, fmt.Errorf("release program pages %x-%x: %w", m.start, m.end, errno)
		}
	}
	return resident, true, nil
}

// mapping is one mapping of /proc/self/smaps that ReleaseProgram may drop.
type mapping struct {
	start, end uintptr
	rss, anon  uint64 // bytes
}

// programMappings returns the read-only, private mappings of the file with
// inode ino (code and read-only data), with their resident and anonymous
// sizes.
func programMappings(smaps []byte, ino uint64) []mapping {
	var out []mapping
	var cur *mapping
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") {
			// A mapping's header: start-end perms offset dev inode path.
			cur = nil
			if len(f) < 6 || (f[1] != "r-xp" && f[1] != "r--p") {
				continue
			}
			if n, err := strconv.ParseUint(f[4], 10, 64); err != nil || n != ino || n == 0 {
				continue
			}
			lo, hi, ok := strings.Cut(f[0], "-")
			s, err1 := strconv.ParseUint(lo, 16, 64)
			e, err2 := strconv.ParseUint(hi, 16, 64)
			if !ok || err1 != nil || err2 != nil || e <= s {
				continue
			}
			out = append(out, mapping{start: uintptr(s), end: uintptr(e)})
			cur = &out[len(out)-1]
			continue
		}
		if cur == nil || len(f) < 2 {
			continue
		}
		kib, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "Rss:":
			cur.rss = kib << 10
		case "Anonymous:":
			cur.anon = kib << 10
		}
	}
	return out
}
