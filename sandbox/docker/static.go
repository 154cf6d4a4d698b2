package docker

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// CheckStatic reports an error unless path is a statically linked ELF
// executable, which is what runs inside any sandbox image: one without a
// PT_INTERP program header (no dynamic loader).
//
// It reads the file header and the program headers with debug/elf's own
// types and constants, but not through elf.NewFile: that one also reads
// every section header and the section names, whose compressed-section
// support links zlib and zstd decoders — 0.15 MB of the release binary for
// this one check (docs/performance.md, Binary size).
func CheckStatic(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not an ELF executable: %w", path, err)
	}
	defer f.Close()
	interp, err := hasInterp(f)
	if err != nil {
		return fmt.Errorf("%s is not an ELF executable: %w", path, err)
	}
	if interp {
		return fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0 or set sandbox.agent_binary to a static conch", path)
	}
	return nil
}

// hasInterp reports whether the ELF file r has a PT_INTERP program header.
func hasInterp(r io.ReaderAt) (bool, error) {
	var ident [elf.EI_NIDENT]byte
	if _, err := r.ReadAt(ident[:], 0); err != nil {
		return false, fmt.Errorf("reading the ELF header: %w", err)
	}
	if !bytes.HasPrefix(ident[:], []byte(elf.ELFMAG)) {
		return false, errors.New("no ELF magic number")
	}
	var order binary.ByteOrder
	switch elf.Data(ident[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		order = binary.LittleEndian
	case elf.ELFDATA2MSB:
		order = binary.BigEndian
	default:
		return false, fmt.Errorf("unknown ELF data encoding %d", ident[elf.EI_DATA])
	}
	var phoff int64
	var phentsize, phnum int
	switch elf.Class(ident[elf.EI_CLASS]) {
	case elf.ELFCLASS64:
		var h elf.Header64
		if err := binary.Read(io.NewSectionReader(r, 0, int64(binary.Size(h))), order, &h); err != nil {
			return false, fmt.Errorf("reading the ELF header: %w", err)
		}
		phoff, phentsize, phnum = int64(h.Phoff), int(h.Phentsize), int(h.Phnum)
	case elf.ELFCLASS32:
		var h elf.Header32
		if err := binary.Read(io.NewSectionReader(r, 0, int64(binary.Size(h))), order, &h); err != nil {
			return false, fmt.Errorf("reading the ELF header: %w", err)
		}
		phoff, phentsize, phnum = int64(h.Phoff), int(h.Phentsize), int(h.Phnum)
	default:
		return false, fmt.Errorf("unknown ELF class %d", ident[elf.EI_CLASS])
	}
	if phnum > 0 && (phoff <= 0 || phentsize < 4) {
		return false, fmt.Errorf("invalid program header table (offset %d, entry size %d)", phoff, phentsize)
	}
	// p_type is the first word of a program header in both classes.
	var typ [4]byte
	for i := range phnum {
		if _, err := r.ReadAt(typ[:], phoff+int64(i)*int64(phentsize)); err != nil {
			return false, fmt.Errorf("reading program header %d: %w", i, err)
		}
		if elf.ProgType(order.Uint32(typ[:])) == elf.PT_INTERP {
			return true, nil
		}
	}
	return false, nil
}
