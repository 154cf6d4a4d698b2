package main

import (
	"net/http"
	"net/http/pprof"
	"runtime"
)

// heapSampleRate is Go's default MemProfileRate: main turns sampling off
// (it only costs memory when nobody can read a profile); with metrics.pprof
// on, a heap profile needs it.
const heapSampleRate = 512 * 1024

// servePprof adds Go's runtime profiles to mux (metrics.pprof): the index
// and the named profiles under it (heap, goroutine, allocs, block, mutex,
// threadcreate) and a CPU profile. Not the command line (it is conch's own,
// but nothing an operator needs) nor execution traces. net/http/pprof also
// registers itself on http.DefaultServeMux, which conch never serves.
func servePprof(mux *http.ServeMux) {
	runtime.MemProfileRate = heapSampleRate
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
}
