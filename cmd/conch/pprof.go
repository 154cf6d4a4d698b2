package main

import (
	"fmt"
	"net/http"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"
)

// heapSampleRate is Go's default MemProfileRate: main turns sampling off
// (it only costs memory when nobody can read a profile); with metrics.pprof
// on, a heap profile needs it.
const heapSampleRate = 512 * 1024

// maxCPUProfile bounds /debug/pprof/profile?seconds=N.
const maxCPUProfile = 10 * time.Minute

// servePprof adds Go's runtime profiles to mux (metrics.pprof): a plain-text
// index at /debug/pprof/, the named profiles under it (heap, goroutine,
// allocs, block, mutex, threadcreate; ?debug=N and heap's ?gc=1 as
// net/http/pprof reads them) and a CPU profile at /debug/pprof/profile
// (?seconds=N, 30 by default). They are runtime/pprof's own, served as
// net/http/pprof serves them, without importing it: its delta profiles
// (?seconds= on a named profile) parse and merge profiles with
// internal/profile, and with its HTML index, execution traces, symbol
// lookup and the registration on http.DefaultServeMux it was 0.2 MB of the
// release binary (docs/performance.md, Binary size). Not served: the
// command line, traces, symbols (Go's profiles carry their own).
func servePprof(mux *http.ServeMux) {
	runtime.MemProfileRate = heapSampleRate
	mux.HandleFunc("GET /debug/pprof/{$}", pprofIndex)
	mux.HandleFunc("GET /debug/pprof/profile", pprofCPU)
	mux.HandleFunc("GET /debug/pprof/{name}", pprofNamed)
}

// pprofError answers a profile request that cannot be served, in text.
func pprofError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Del("Content-Disposition")
	w.WriteHeader(status)
	fmt.Fprintln(w, msg)
}

// pprofIndex lists the profiles with their counts and how to fetch them.
func pprofIndex(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	fmt.Fprintln(w, "conch: Go runtime profiles (metrics.pprof)")
	fmt.Fprintln(w)
	for _, p := range pprof.Profiles() {
		fmt.Fprintf(w, "%8d  /debug/pprof/%s\n", p.Count(), p.Name())
	}
	fmt.Fprintln(w, "          /debug/pprof/profile?seconds=30  (CPU)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "?debug=1 prints a profile as text; /debug/pprof/heap?gc=1 collects garbage first.")
	fmt.Fprintln(w, "go tool pprof -top -inuse_space http://HOST/debug/pprof/heap")
}

// pprofNamed writes one of runtime/pprof's named profiles.
func pprofNamed(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	name := r.PathValue("name")
	p := pprof.Lookup(name)
	if p == nil {
		pprofError(w, http.StatusNotFound, fmt.Sprintf("unknown profile %q (the list: /debug/pprof/)", name))
		return
	}
	if r.FormValue("seconds") != "" {
		pprofError(w, http.StatusBadRequest, `"seconds" is not served for `+name+`: take two profiles and compare them with go tool pprof -diff_base`)
		return
	}
	debug := 0
	if s := r.FormValue("debug"); s != "" {
		var err error
		if debug, err = strconv.Atoi(s); err != nil || debug < 0 {
			pprofError(w, http.StatusBadRequest, `"debug" must be 0, 1 or 2`)
			return
		}
	}
	if gc, _ := strconv.Atoi(r.FormValue("gc")); name == "heap" && gc > 0 {
		runtime.GC()
	}
	if debug != 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"`, name))
	}
	_ = p.WriteTo(w, debug) // a failed write is the client gone
}

// pprofCPU profiles the CPU for ?seconds=N (30 by default) and writes it.
func pprofCPU(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	d := 30 * time.Second
	if s := r.FormValue("seconds"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil || sec <= 0 || time.Duration(sec)*time.Second > maxCPUProfile {
			pprofError(w, http.StatusBadRequest, fmt.Sprintf(`"seconds" must be a whole number from 1 to %d`, int(maxCPUProfile.Seconds())))
			return
		}
		d = time.Duration(sec) * time.Second
	}
	// The headers are set first: once profiling starts, it writes.
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="profile"`)
	if err := pprof.StartCPUProfile(w); err != nil {
		pprofError(w, http.StatusInternalServerError, "cannot profile the CPU: "+err.Error())
		return
	}
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-r.Context().Done():
		t.Stop()
	}
	pprof.StopCPUProfile()
}
