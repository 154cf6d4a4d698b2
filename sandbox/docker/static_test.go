package docker

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// hasInterp agrees with debug/elf's full parser on the machine's own
// programs (dynamic ones, and conch's static test binary).
func TestHasInterpAgreesWithDebugElf(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	files := []string{exe}
	for _, dir := range []string{"/bin", "/usr/bin", "/usr/local/go/bin"} {
		es, _ := os.ReadDir(dir)
		for _, e := range es {
			if e.Type().IsRegular() && len(files) < 60 {
				files = append(files, filepath.Join(dir, e.Name()))
			}
		}
	}
	checked := 0
	for _, path := range files {
		ef, err := elf.Open(path)
		if err != nil {
			continue // a script
		}
		want := false
		for _, p := range ef.Progs {
			want = want || p.Type == elf.PT_INTERP
		}
		ef.Close()
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := hasInterp(f)
		f.Close()
		if err != nil || got != want {
			t.Errorf("%s: hasInterp = %v, %v; debug/elf says PT_INTERP %v", path, got, err, want)
		}
		checked++
	}
	if checked < 2 {
		t.Fatalf("only %d ELF files to compare with", checked)
	}
}

// elf32 builds a 32-bit ELF header in byte order bo with program headers
// of the given types.
func elf32(bo binary.ByteOrder, data elf.Data, types ...elf.ProgType) []byte {
	var b bytes.Buffer
	h := elf.Header32{Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_ARM), Version: uint32(elf.EV_CURRENT),
		Phoff: 52, Ehsize: 52, Phentsize: 32, Phnum: uint16(len(types))}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS32), byte(data), byte(elf.EV_CURRENT)
	binary.Write(&b, bo, h)
	for _, typ := range types {
		binary.Write(&b, bo, elf.Prog32{Type: uint32(typ)})
	}
	return b.Bytes()
}

func TestHasInterpMadeUpFiles(t *testing.T) {
	for name, c := range map[string]struct {
		data    []byte
		want    bool
		wantErr bool
	}{
		"32-bit big-endian, dynamic":   {data: elf32(binary.BigEndian, elf.ELFDATA2MSB, elf.PT_LOAD, elf.PT_INTERP), want: true},
		"32-bit little-endian, static": {data: elf32(binary.LittleEndian, elf.ELFDATA2LSB, elf.PT_LOAD, elf.PT_NOTE)},
		"no program headers":           {data: elf32(binary.LittleEndian, elf.ELFDATA2LSB)},
		"truncated header":             {data: []byte("\x7fELF\x02\x01\x01"), wantErr: true},
		"not ELF":                      {data: []byte("#!/bin/sh\necho hello world\n"), wantErr: true},
		"unknown class":                {data: append([]byte("\x7fELF\x07\x01\x01"), make([]byte, 64)...), wantErr: true},
		"unknown data encoding":        {data: append([]byte("\x7fELF\x02\x09\x01"), make([]byte, 64)...), wantErr: true},
		"program headers past the end": {data: elf32(binary.LittleEndian, elf.ELFDATA2LSB, elf.PT_LOAD)[:54], wantErr: true},
	} {
		got, err := hasInterp(bytes.NewReader(c.data))
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("%s: hasInterp = %v, %v; want %v, error %v", name, got, err, c.want, c.wantErr)
		}
		if c.wantErr {
			continue
		}
		// debug/elf reads the made-up files the same way.
		ef, err := elf.NewFile(bytes.NewReader(c.data))
		if err != nil {
			t.Fatalf("%s: debug/elf: %v", name, err)
		}
		want := false
		for _, p := range ef.Progs {
			want = want || p.Type == elf.PT_INTERP
		}
		if want != c.want {
			t.Errorf("%s: debug/elf says PT_INTERP %v", name, want)
		}
	}
}
