package skill

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"conch"
	"conch/internal/flock"
)

// Paths inside every sandbox.
const (
	// SandboxPath is where the enabled host skills are mounted read-only.
	SandboxPath = "/opt/conch/skills"
	// WorkspacePath holds a conversation's own skills (skills.workspace).
	WorkspacePath = "/workspace/.agents/skills"
)

// cursorPrefix keys the enabled state in the store's cursors.
const cursorPrefix = "skill:"

// State values stored under skill:<name>.
const (
	stateEnabled  = "enabled"
	stateDisabled = "disabled"
)

// Options configures a Manager.
type Options struct {
	// Bundled are the skills built into conch; nil means none.
	Bundled fs.FS
	// SharedDir is ~/.agents/skills (shared with other agents); "" skips it.
	SharedDir string
	// UserDir is $XDG_CONFIG_HOME/conch/skills; "" skips it.
	UserDir string
	// Workspace reads each conversation's /workspace/.agents/skills too. A
	// workspace is written by the model, so this is off by default.
	Workspace bool
	// State keeps the enabled state (skill:<name> cursors); nil means every
	// skill is enabled.
	State conch.CursorStore
	// SandboxDir is the host directory mounted read-only at SandboxPath in
	// every sandbox; the manager fills it with the enabled host skills. ""
	// means skills have no files in sandboxes.
	SandboxDir string
	Logger     *slog.Logger
}

// Manager finds skills, keeps their enabled state and fills the directory
// sandboxes see. It is safe for concurrent use.
type Manager struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	synced map[string]string // name → fingerprint of what SandboxDir holds
}

// NewManager returns a Manager.
func NewManager(o Options) *Manager {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{opts: o, log: log.With("component", "skills")}
}

// WorkspaceEnabled reports whether conversations' workspace skills are read.
func (m *Manager) WorkspaceEnabled() bool { return m.opts.Workspace }

func (m *Manager) hostDirs() []Dir {
	var ds []Dir
	if m.opts.Bundled != nil {
		ds = append(ds, Dir{Source: SourceBundled, FS: m.opts.Bundled})
	}
	if m.opts.SharedDir != "" {
		ds = append(ds, Dir{Source: SourceShared, FS: os.DirFS(m.opts.SharedDir), Location: m.opts.SharedDir})
	}
	if m.opts.UserDir != "" {
		ds = append(ds, Dir{Source: SourceUser, FS: os.DirFS(m.opts.UserDir), Location: m.opts.UserDir})
	}
	return ds
}

// Catalog lists the host's skills (bundled, shared, user) with their
// enabled state. A directory that cannot be read is logged and skipped:
// skills never stop conch.
func (m *Manager) Catalog(ctx context.Context) (Catalog, error) {
	var lists [][]Skill
	for _, d := range m.hostDirs() {
		l, err := Scan(ctx, d)
		if err != nil {
			if ctx.Err() != nil {
				return Catalog{}, ctx.Err()
			}
			m.log.Warn("skills directory unreadable", "dir", d.describe(), "err", err)
			continue
		}
		lists = append(lists, l)
	}
	c := Merge(lists...)
	return c, m.fillState(ctx, &c)
}

// ForConversation is Catalog plus, with skills.workspace on, the skills in
// the conversation's workspace (read through its sandbox).
func (m *Manager) ForConversation(ctx context.Context, env conch.ToolEnv) (Catalog, error) {
	if !m.opts.Workspace || env.Sandboxes == nil {
		return m.Catalog(ctx)
	}
	var lists [][]Skill
	for _, d := range m.hostDirs() {
		l, err := Scan(ctx, d)
		if err != nil {
			m.log.Warn("skills directory unreadable", "dir", d.describe(), "err", err)
			continue
		}
		lists = append(lists, l)
	}
	sb, err := env.Sandbox(ctx)
	if err != nil {
		m.log.Warn("workspace skills unreadable: no sandbox", "conversation", env.Conversation.String(), "err", err)
	} else {
		l, err := Scan(ctx, Dir{Source: SourceWorkspace, FS: &sandboxFS{ctx: ctx, sb: sb, root: WorkspacePath}, Location: WorkspacePath, Shallow: true})
		if err != nil {
			m.log.Warn("workspace skills unreadable", "conversation", env.Conversation.String(), "err", err)
		}
		lists = append(lists, l)
	}
	c := Merge(lists...)
	return c, m.fillState(ctx, &c)
}

func (m *Manager) fillState(ctx context.Context, c *Catalog) error {
	for _, list := range [][]Skill{c.Skills, c.Shadowed} {
		for i := range list {
			on, err := m.Enabled(ctx, list[i].Name)
			if err != nil {
				return err
			}
			list[i].Enabled = on
		}
	}
	return nil
}

// Enabled reads a skill's state; skills are enabled unless disabled.
func (m *Manager) Enabled(ctx context.Context, name string) (bool, error) {
	if m.opts.State == nil {
		return true, nil
	}
	v, err := m.opts.State.Cursor(ctx, cursorPrefix+name)
	if err != nil {
		return false, fmt.Errorf("skill state %s: %w", name, err)
	}
	return v != stateDisabled, nil
}

// SetEnabled stores a skill's state and refreshes the sandbox directory.
func (m *Manager) SetEnabled(ctx context.Context, name string, on bool) error {
	if m.opts.State == nil {
		return errors.New("skills: no store for the enabled state")
	}
	v := stateDisabled
	if on {
		v = stateEnabled
	}
	if err := m.opts.State.SetCursor(ctx, cursorPrefix+name, v); err != nil {
		return fmt.Errorf("skill state %s: %w", name, err)
	}
	c, err := m.Catalog(ctx)
	if err != nil {
		return err
	}
	return m.Sync(ctx, c)
}

// Location is where a skill's files are inside the sandbox; "" when they
// are not there.
func (m *Manager) Location(s Skill) string {
	switch {
	case s.Source == SourceWorkspace:
		return WorkspacePath + "/" + s.Folder
	case m.opts.SandboxDir == "":
		return ""
	}
	return SandboxPath + "/" + s.Name
}

// Sync makes SandboxDir hold exactly the enabled, usable host skills of c,
// each at <name>/. Unchanged skills are left alone; another conch process
// syncing the same directory waits on a file lock.
func (m *Manager) Sync(ctx context.Context, c Catalog) error {
	dir := m.opts.SandboxDir
	if dir == "" {
		return nil
	}
	want := map[string]Skill{}
	for _, s := range c.Skills {
		if s.Enabled && s.Source != SourceWorkspace && s.tree.fsys != nil {
			want[s.Name] = s
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("skills sandbox dir: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("skills sandbox dir: %w", err)
	}
	fps := map[string]string{}
	changed := len(m.synced) != len(want) || m.synced == nil
	for name, s := range want {
		fp, err := fingerprint(s.tree)
		if err != nil {
			return fmt.Errorf("skill %s: %w", name, err)
		}
		fps[name] = fp
		if m.synced[name] != fp {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	unlock, err := flock.Lock(ctx, dir+".lock")
	if err != nil {
		return err
	}
	defer unlock()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("skills sandbox dir: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if _, keep := want[name]; keep && !strings.HasPrefix(name, ".") {
			continue
		}
		if base, ok := strings.CutSuffix(strings.TrimPrefix(name, "."), ".fp"); ok && strings.HasPrefix(name, ".") {
			if _, keep := want[base]; keep {
				continue // the fingerprint of a skill that stays
			}
		}
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("skills sandbox dir: %w", err)
		}
	}
	for name, s := range want {
		marker := filepath.Join(dir, "."+name+".fp")
		if b, err := os.ReadFile(marker); err == nil && string(b) == fps[name] {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				continue // another process or an earlier run wrote it
			}
		}
		if err := install(dir, name, s.tree); err != nil {
			return fmt.Errorf("skill %s: %w", name, err)
		}
		if err := os.WriteFile(marker, []byte(fps[name]), 0o644); err != nil {
			return fmt.Errorf("skill %s: %w", name, err)
		}
		m.log.Info("skill copied for sandboxes", "skill", name, "source", s.Source)
	}
	m.synced = fps
	return nil
}

// copyBufs are fingerprint's read buffers: io.Copy allocated 32 KiB per
// file, and every skill is fingerprinted every turn (18 % of all that
// was allocated in a soak of 3,000 turns).
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// fingerprint hashes a skill's file names, modes and contents.
func fingerprint(t tree) (string, error) {
	h := sha256.New()
	files, _, _, err := walk(t.fsys, t.root)
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	for _, f := range files {
		p := path.Join(t.root, f)
		info, err := fs.Stat(t.fsys, p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00", f, info.Mode().Perm(), info.Size())
		r, err := t.fsys.Open(p)
		if err != nil {
			return "", err
		}
		buf := copyBufs.Get().(*[]byte)
		_, err = io.CopyBuffer(h, r, *buf)
		copyBufs.Put(buf)
		r.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// install copies a skill's tree to dir/name through a temporary directory
// and renames it into place, so a sandbox never sees half a skill.
func install(dir, name string, t tree) error {
	tmp, err := os.MkdirTemp(dir, ".tmp-"+name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	files, _, _, err := walk(t.fsys, t.root)
	if err != nil {
		return err
	}
	for _, rel := range files {
		src := path.Join(t.root, rel)
		dst := filepath.Join(tmp, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		info, err := fs.Stat(t.fsys, src)
		if err != nil {
			return err
		}
		in, err := t.fsys.Open(src)
		if err != nil {
			return err
		}
		data, err := io.ReadAll(io.LimitReader(in, MaxSkillBytes+1))
		in.Close()
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if info.Mode().Perm()&0o111 != 0 || (strings.HasPrefix(rel, "scripts/") && strings.HasPrefix(string(data), "#!")) {
			mode = 0o755
		}
		if err := os.WriteFile(dst, data, mode); err != nil {
			return err
		}
		if err := os.Chmod(dst, mode); err != nil { // the umask must not hide them from the sandbox user
			return err
		}
	}
	final := filepath.Join(dir, name)
	old := ""
	if _, err := os.Lstat(final); err == nil {
		old = filepath.Join(dir, ".old-"+name+"-"+filepath.Base(tmp))
		if err := os.Rename(final, old); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	if old != "" {
		return os.RemoveAll(old)
	}
	return nil
}

// Body returns what the skill tool shows the model: where the files are,
// which there are, and the instructions.
func (m *Manager) Body(s Skill) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Skill %s (%s)\n", s.Name, s.Source)
	if loc := m.Location(s); loc != "" {
		fmt.Fprintf(&b, "Files: %s (read-only in your computer; run its scripts there, relative paths in the instructions are relative to it)\n", loc)
	} else {
		b.WriteString("Files: not available (no sandbox runtime); follow the instructions without its scripts\n")
	}
	if len(s.Files) > 1 || (len(s.Files) == 1 && s.Files[0] != "SKILL.md") {
		fmt.Fprintf(&b, "Contents: %s\n", strings.Join(s.Files, ", "))
	}
	if s.Compatibility != "" {
		fmt.Fprintf(&b, "Compatibility: %s\n", s.Compatibility)
	}
	b.WriteString("\n")
	b.WriteString(s.Body)
	return b.String()
}

// PromptBlock lists the enabled skills of a conversation for the system
// prompt (name, description, location only: the body is loaded by the
// skill tool), and refreshes the sandbox directory on the way. Failures are
// logged; a conversation always gets a prompt.
func (m *Manager) PromptBlock(ctx context.Context, env conch.ToolEnv) string {
	c, err := m.ForConversation(ctx, env)
	if err != nil {
		m.log.Warn("skills unavailable for this turn", "err", err)
		return ""
	}
	if err := m.Sync(ctx, c); err != nil {
		m.log.Warn("skills not copied for sandboxes", "err", err)
	}
	return FormatPrompt(c, m.Location)
}

// FormatPrompt renders the enabled skills as the <available_skills> block.
func FormatPrompt(c Catalog, location func(Skill) string) string {
	var b strings.Builder
	n := 0
	for _, s := range c.Skills {
		if !s.Enabled {
			continue
		}
		if n == 0 {
			b.WriteString("<available_skills>\nSkills are instructions for particular tasks. When a task matches a skill's description, " +
				"call the skill tool with its name to read the instructions before you start.\n")
		}
		n++
		fmt.Fprintf(&b, "<skill>\n<name>%s</name>\n<description>%s</description>\n", xmlText(s.Name), xmlText(oneLine(s.Description)))
		if loc := location(s); loc != "" {
			fmt.Fprintf(&b, "<location>%s</location>\n", xmlText(loc))
		}
		b.WriteString("</skill>\n")
	}
	if n == 0 {
		return ""
	}
	b.WriteString("</available_skills>")
	return b.String()
}

// xmlEscaper is built once: a Replacer is safe for concurrent use, and
// building one per call was a large share of a turn's allocations.
var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func xmlText(s string) string { return xmlEscaper.Replace(s) }

// Load returns the enabled, usable skill called name for a conversation.
func (m *Manager) Load(ctx context.Context, env conch.ToolEnv, name string) (Skill, Catalog, error) {
	c, err := m.ForConversation(ctx, env)
	if err != nil {
		return Skill{}, c, err
	}
	s, ok := c.Find(name)
	if !ok {
		return Skill{}, c, fmt.Errorf("%w: %q", ErrNoSkill, name)
	}
	if !s.Enabled {
		return s, c, fmt.Errorf("%w: %q is disabled", ErrDisabled, name)
	}
	if err := m.Sync(ctx, c); err != nil {
		return s, c, err
	}
	return s, c, nil
}

// Errors Load returns.
var (
	ErrNoSkill   = errors.New("no such skill")
	ErrDisabled  = errors.New("skill disabled")
	ErrBadName   = errors.New("invalid skill name")
	ErrDirExists = errors.New("skill folder exists")
)

// Create scaffolds a skill folder dir/name with a SKILL.md to edit.
func Create(dir, name, description string) (string, error) {
	if !ValidName(name) {
		return "", fmt.Errorf("%w %q: use lowercase letters, digits and single hyphens, at most %d characters (e.g. release-notes)", ErrBadName, name, maxName)
	}
	if description == "" {
		description = "Describe what this skill does and when to use it."
	}
	p := filepath.Join(dir, name)
	if _, err := os.Lstat(p); err == nil {
		return "", fmt.Errorf("%w: %s", ErrDirExists, p)
	}
	if err := os.MkdirAll(filepath.Join(p, "scripts"), 0o755); err != nil {
		return "", fmt.Errorf("create skill: %w", err)
	}
	text := "---\nname: " + name + "\ndescription: " + yamlScalar(description) + "\n---\n\n# " + name + "\n\n" +
		"Write the instructions here: the steps, the commands to run, what to check and what to report.\n" +
		"Put scripts in scripts/ (they run inside the conversation's computer, read-only at " + SandboxPath + "/" + name + "),\n" +
		"longer documents in references/ and templates in assets/, and refer to them by relative path.\n"
	if err := os.WriteFile(filepath.Join(p, "SKILL.md"), []byte(text), 0o644); err != nil {
		return "", fmt.Errorf("create skill: %w", err)
	}
	return p, nil
}

func yamlScalar(s string) string {
	s = oneLine(s)
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`) + `"`
}
