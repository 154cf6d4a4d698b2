// Package crpyto provides the nessesary encryption methods for olm/megolm
package crypto
