package skill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// Dir is one place skills are found: each folder in it holding a SKILL.md.
type Dir struct {
	Source Source
	FS     fs.FS
	// Location is how people see the directory (a path); "" for bundled.
	Location string
	// Shallow skips walking each skill's files (a workspace read through the
	// sandbox, where every file is a round trip).
	Shallow bool
}

// tree is a skill's files, for copying into sandboxes.
type tree struct {
	fsys  fs.FS
	root  string
	bytes int64
}

// Scan reads every skill of one directory. A missing directory has no
// skills; any other failure to read it is returned. Within one directory a
// name used twice makes the later folder (in name order) broken.
func Scan(ctx context.Context, d Dir) ([]Skill, error) {
	entries, err := fs.ReadDir(d.FS, ".")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("skills in %s: %w", d.describe(), err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	var out []Skill
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		folder := e.Name()
		if strings.HasPrefix(folder, ".") {
			continue
		}
		info, err := fs.Stat(d.FS, folder) // follows a symlinked skill folder
		if err != nil || !info.IsDir() {
			continue
		}
		out = append(out, scanOne(d, folder))
	}
	// A folder named like its skill keeps the name (the specification's
	// rule); among the others, the first folder in name order.
	seen := map[string]string{} // name → folder
	for _, pass := range []bool{true, false} {
		for i := range out {
			s := &out[i]
			if !s.OK() || (s.Name == s.Folder) != pass {
				continue
			}
			if other, dup := seen[s.Name]; dup {
				s.Broken = fmt.Sprintf("duplicate name %q: the folder %q in the same place already uses it", s.Name, other)
				continue
			}
			seen[s.Name] = s.Folder
		}
	}
	return out, nil
}

func (d Dir) describe() string {
	if d.Location == "" {
		return string(d.Source)
	}
	return d.Location
}

func scanOne(d Dir, folder string) Skill {
	loc := "(built in)"
	if d.Location != "" {
		loc = strings.TrimSuffix(d.Location, "/") + "/" + folder
	}
	fail := func(why string) Skill {
		return Skill{Name: folder, Folder: folder, Source: d.Source, Location: loc, Broken: why}
	}
	file := path.Join(folder, "SKILL.md")
	info, err := fs.Stat(d.FS, file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fail("no SKILL.md in the folder")
	case err != nil:
		return fail("cannot read SKILL.md: " + err.Error())
	case !info.Mode().IsRegular():
		return fail("SKILL.md is not a regular file")
	case info.Size() > MaxSkillFile:
		return fail(fmt.Sprintf("SKILL.md is %d bytes, over the %d-byte cap", info.Size(), MaxSkillFile))
	}
	data, err := readCapped(d.FS, file, MaxSkillFile)
	if err != nil {
		return fail("cannot read SKILL.md: " + err.Error())
	}
	s := Parse(folder, data)
	s.Source, s.Location = d.Source, loc
	if !s.OK() {
		return s
	}
	if d.Shallow {
		s.Files = []string{"SKILL.md"}
		return s
	}
	t := tree{fsys: d.FS, root: folder}
	files, size, skipped, err := walk(d.FS, folder)
	if err != nil {
		s.Broken = "cannot list its files: " + err.Error()
		return s
	}
	switch {
	case size > MaxSkillBytes:
		s.Broken = fmt.Sprintf("its files hold %d bytes, over the %d-byte cap", size, MaxSkillBytes)
	case len(files) > MaxSkillFiles:
		s.Broken = fmt.Sprintf("it has %d files, over the cap of %d", len(files), MaxSkillFiles)
	}
	for _, sk := range skipped {
		s.Warnings = append(s.Warnings, sk+" is a symbolic link or special file and is not copied")
	}
	t.bytes = size
	s.Files, s.tree = files, t
	return s
}

func readCapped(fsys fs.FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("over the %d-byte cap", limit)
	}
	return b, nil
}

// walk lists regular files below root (relative to it), never following a
// symbolic link: a link could reach any host file, and the files are copied
// into sandboxes.
func walk(fsys fs.FS, root string) (files []string, size int64, skipped []string, err error) {
	err = fs.WalkDir(fsys, root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
		if p == root {
			return nil
		}
		switch {
		case e.IsDir():
			if len(files) > MaxSkillFiles {
				return fs.SkipDir
			}
			return nil
		case !e.Type().IsRegular():
			skipped = append(skipped, rel)
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		files = append(files, rel)
		size += info.Size()
		return nil
	})
	return files, size, skipped, err
}

// Catalog is every skill found, after precedence.
type Catalog struct {
	// Skills are the usable skills, one per name, by name.
	Skills []Skill
	// Broken lists skills that cannot be used, with the reason.
	Broken []Skill
	// Shadowed lists usable skills a later source overrides.
	Shadowed []Skill
}

// Merge applies precedence: a usable skill from a later source replaces an
// earlier one of the same name; broken skills replace nothing.
func Merge(lists ...[]Skill) Catalog {
	var c Catalog
	byName := map[string]int{}
	for _, list := range lists {
		for _, s := range list {
			if !s.OK() {
				c.Broken = append(c.Broken, s)
				continue
			}
			if i, ok := byName[s.Name]; ok {
				old := c.Skills[i]
				s.Shadows = append(append([]Source(nil), old.Shadows...), old.Source)
				c.Shadowed = append(c.Shadowed, old)
				c.Skills[i] = s
				continue
			}
			byName[s.Name] = len(c.Skills)
			c.Skills = append(c.Skills, s)
		}
	}
	sort.Slice(c.Skills, func(i, j int) bool { return c.Skills[i].Name < c.Skills[j].Name })
	return c
}

// Find returns the usable skill called name.
func (c Catalog) Find(name string) (Skill, bool) {
	for _, s := range c.Skills {
		if s.Name == name {
			return s, true
		}
	}
	return Skill{}, false
}
