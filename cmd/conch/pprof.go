package main

import (
	"net/http"
	"net/http/pprof"
)

// servePprof adds Go's runtime profiles to mux (metrics.pprof): the index
// and the named profiles under it (heap, goroutine, allocs, block, mutex,
// threadcreate) and a CPU profile. Not the command line (it is conch's own,
// but nothing an operator needs) nor execution traces. net/http/pprof also
// registers itself on http.DefaultServeMux, which conch never serves.
func servePprof(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
}
