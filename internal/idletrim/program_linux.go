package idletrim

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
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
// unmapping would drop the change (a breakpoint set between the look and
// the release would be lost). It does so only when at least atLeast bytes
// of them are resident (0: always), and returns how many were and whether
// it released them.
func ReleaseProgram(atLeast uint64) (resident uint64, released bool, err error) {
	// It runs every quiet period: it keeps its buffers, so that it leaves
	// no garbage (an idle process's heap would grow with it until the next
	// collection).
	smaps.mu.Lock()
	defer smaps.mu.Unlock()
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &st); err != nil {
		return 0, false, fmt.Errorf("release program pages: %w", err)
	}
	if err := smaps.read(); err != nil {
		return 0, false, fmt.Errorf("release program pages: %w", err)
	}
	smaps.maps = programMappings(smaps.buf, st.Ino, smaps.maps[:0])
	for _, m := range smaps.maps {
		if m.anon == 0 {
			resident += m.rss
		}
	}
	if resident < atLeast {
		return resident, false, nil
	}
	for _, m := range smaps.maps {
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

// smaps is /proc/self/smaps as last read, in buffers kept between calls.
var smaps smapsBuf

type smapsBuf struct {
	mu   sync.Mutex
	buf  []byte
	maps []mapping
}

// read reads /proc/self/smaps into buf, growing it as needed.
func (s *smapsBuf) read() error {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return err
	}
	defer f.Close()
	s.buf = s.buf[:0]
	for {
		if len(s.buf) == cap(s.buf) {
			s.buf = append(s.buf, 0)[:len(s.buf)]
		}
		n, err := f.Read(s.buf[len(s.buf):cap(s.buf)])
		s.buf = s.buf[:len(s.buf)+n]
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// mapping is one mapping of /proc/self/smaps that ReleaseProgram may drop.
type mapping struct {
	start, end uintptr
	rss, anon  uint64 // bytes
}

// programMappings appends to out the read-only, private mappings of the
// file with inode ino (code and read-only data), with their resident and
// anonymous sizes. It allocates nothing but out's growth.
func programMappings(smaps []byte, ino uint64, out []mapping) []mapping {
	cur := -1 // index in out of the mapping whose fields follow, -1: none
	for len(smaps) > 0 {
		line := smaps
		if i := bytes.IndexByte(smaps, '\n'); i >= 0 {
			line, smaps = smaps[:i], smaps[i+1:]
		} else {
			smaps = nil
		}
		var f [6][]byte
		n := fields(line, f[:])
		if n == 0 {
			continue
		}
		if f[0][len(f[0])-1] != ':' {
			// A mapping's header: start-end perms offset dev inode [path].
			cur = -1
			if n < 5 || (string(f[1]) != "r-xp" && string(f[1]) != "r--p") {
				continue
			}
			if i, err := strconv.ParseUint(string(f[4]), 10, 64); err != nil || i != ino || i == 0 {
				continue
			}
			lo, hi, ok := bytes.Cut(f[0], []byte{'-'})
			s, err1 := strconv.ParseUint(string(lo), 16, 64)
			e, err2 := strconv.ParseUint(string(hi), 16, 64)
			if !ok || err1 != nil || err2 != nil || e <= s {
				continue
			}
			out = append(out, mapping{start: uintptr(s), end: uintptr(e)})
			cur = len(out) - 1
			continue
		}
		if cur < 0 || n < 2 {
			continue
		}
		kib, err := strconv.ParseUint(string(f[1]), 10, 64)
		if err != nil {
			continue
		}
		switch string(f[0]) {
		case "Rss:":
			out[cur].rss = kib << 10
		case "Anonymous:":
			out[cur].anon = kib << 10
		}
	}
	return out
}

// fields splits line at runs of spaces into f (at most len(f) fields, the
// last taking the rest) and returns how many it found.
func fields(line []byte, f [][]byte) int {
	n := 0
	for n < len(f) {
		line = bytes.TrimLeft(line, " \t")
		if len(line) == 0 {
			break
		}
		if n == len(f)-1 {
			f[n] = line
			n++
			break
		}
		i := bytes.IndexAny(line, " \t")
		if i < 0 {
			f[n] = line
			n++
			break
		}
		f[n], line = line[:i], line[i:]
		n++
	}
	return n
}
