package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"conch/config"
	"conch/skill"
)

func (a *app) skillsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "skills",
		Short: "List, inspect, enable, disable or create skills (Agent Skills SKILL.md folders)",
		Long: "Skills are folders with a SKILL.md (YAML front matter with name and description, then instructions).\n" +
			"conch finds them, later overriding earlier: built in < ~/.agents/skills < $XDG_CONFIG_HOME/conch/skills\n" +
			"< a conversation's /workspace/.agents/skills (only with skills.workspace = true).\n" +
			"The model sees the enabled skills' names and descriptions and loads one with the skill tool;\n" +
			"their files are read-only in every sandbox at " + skill.SandboxPath + "/<name>.",
	}
	cmd.AddCommand(a.skillsListCmd(), a.skillsInfoCmd())
	cmd.AddCommand(&cobra.Command{Use: "enable NAME", Short: "Enable a skill", Args: cobra.ExactArgs(1), RunE: a.setSkillState(true)})
	cmd.AddCommand(&cobra.Command{Use: "disable NAME", Short: "Disable a skill (the model no longer sees it)", Args: cobra.ExactArgs(1), RunE: a.setSkillState(false)})
	cmd.AddCommand(a.skillsCreateCmd())
	return cmd
}

// openSkills loads the configuration and the store; the returned func
// releases the store.
func (a *app) openSkills(ctx context.Context) (*config.Config, *skill.Manager, func(), error) {
	cfg, err := a.loadOperatorConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, nil, nil, fmt.Errorf("data_dir %s: %w (set CONCH_DATA_DIR to a writable directory)", cfg.DataDir, err)
	}
	db, err := openDataStore(ctx, cfg.DataDir, a.stderr)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open store: %w", err)
	}
	// The sandbox directory is refreshed too, so running sandboxes see
	// an enable or disable at once.
	return cfg, newSkills(cfg, db, true, nil), func() { db.Close() }, nil
}

// skillsListCmd is conch skills list.
func (a *app) skillsListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List skills: name, source, enabled or disabled, description; then broken ones with the reason",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, m, done, err := a.openSkills(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			c, err := m.Catalog(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSOURCE\tSTATE\tDESCRIPTION")
			for _, s := range c.Skills {
				state := "enabled"
				if !s.Enabled {
					state = "disabled"
				}
				src := string(s.Source)
				if len(s.Shadows) > 0 {
					src += " (overrides " + joinSources(s.Shadows) + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, src, state, clipText(s.Description, 90))
			}
			tw.Flush()
			if len(c.Skills) == 0 {
				fmt.Fprintln(a.stdout, "(no skills)")
			}
			if len(c.Broken) > 0 {
				fmt.Fprintln(a.stdout, "\nBROKEN (not used):")
				tw = tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				for _, s := range c.Broken {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Location, s.Source, s.Broken)
				}
				tw.Flush()
			}
			if warned := countWarnings(c); warned > 0 {
				fmt.Fprintf(a.stdout, "\n%d skill(s) have warnings; see conch skills info NAME\n", warned)
			}
			return nil
		},
	}
}

// skillsInfoCmd is conch skills info NAME.
func (a *app) skillsInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "info NAME",
		Short: "Show a skill: where it is, its fields, files, warnings and instructions",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, m, done, err := a.openSkills(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			c, err := m.Catalog(cmd.Context())
			if err != nil {
				return err
			}
			s, ok := c.Find(args[0])
			if !ok {
				for _, b := range c.Broken {
					if b.Name == args[0] || b.Folder == args[0] {
						fmt.Fprintf(a.stdout, "name:      %s\nlocation:  %s\nsource:    %s\nBROKEN:    %s\n", b.Name, b.Location, b.Source, b.Broken)
						return nil
					}
				}
				return noSkill(args[0], c)
			}
			a.printSkill(m, s)
			return nil
		},
	}
}

// printSkill writes one skill's fields, files, warnings and instructions.
func (a *app) printSkill(m *skill.Manager, s skill.Skill) {
	state := "enabled"
	if !s.Enabled {
		state = "disabled"
	}
	w := a.stdout
	fmt.Fprintf(w, "name:          %s\nstate:         %s\nsource:        %s\nlocation:      %s\n", s.Name, state, s.Source, s.Location)
	if loc := m.Location(s); loc != "" {
		fmt.Fprintf(w, "in sandboxes:  %s (read-only)\n", loc)
	}
	if len(s.Shadows) > 0 {
		fmt.Fprintf(w, "overrides:     %s\n", joinSources(s.Shadows))
	}
	fmt.Fprintf(w, "description:   %s\n", s.Description)
	if s.License != "" {
		fmt.Fprintf(w, "license:       %s\n", s.License)
	}
	if s.Compatibility != "" {
		fmt.Fprintf(w, "compatibility: %s\n", s.Compatibility)
	}
	if len(s.AllowedTools) > 0 {
		fmt.Fprintf(w, "allowed-tools: %s\n", strings.Join(s.AllowedTools, " "))
	}
	if len(s.Metadata) > 0 {
		keys := make([]string, 0, len(s.Metadata))
		for k := range s.Metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "metadata:      %s = %s\n", k, s.Metadata[k])
		}
	}
	fmt.Fprintf(w, "files:         %s\n", strings.Join(s.Files, ", "))
	for _, warn := range s.Warnings {
		fmt.Fprintf(w, "warning:       %s\n", warn)
	}
	fmt.Fprintf(w, "\n%s\n", s.Body)
}

// setSkillState is conch skills enable/disable NAME.
func (a *app) setSkillState(on bool) func(cmd *cobra.Command, args []string) error {
	return func(cmd *cobra.Command, args []string) error {
		_, m, done, err := a.openSkills(cmd.Context())
		if err != nil {
			return err
		}
		defer done()
		c, err := m.Catalog(cmd.Context())
		if err != nil {
			return err
		}
		s, ok := c.Find(args[0])
		if !ok {
			return noSkill(args[0], c)
		}
		if err := m.SetEnabled(cmd.Context(), s.Name, on); err != nil {
			return err
		}
		verb := "enabled"
		if !on {
			verb = "disabled"
		}
		fmt.Fprintf(a.stdout, "%s %s (from the next turn of every conversation)\n", verb, s.Name)
		return nil
	}
}

// skillsCreateCmd is conch skills create NAME.
func (a *app) skillsCreateCmd() *cobra.Command {
	var description string
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Scaffold a user skill in $XDG_CONFIG_HOME/conch/skills/NAME (skills.user_dir)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := a.loadOperatorConfig()
			if err != nil {
				return err
			}
			dir := config.SkillDir(cfg.Skills.UserDir)
			if dir == "" {
				return errors.New("skills.user_dir is none: set it (or CONCH_SKILLS_USER_DIR) to a directory to create skills in")
			}
			p, err := skill.Create(dir, args[0], description)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "created %s\nedit %s: the description says what the skill does and when to use it; the body is the instructions.\n",
				p, filepath.Join(p, "SKILL.md"))
			return nil
		},
	}
	create.Flags().StringVar(&description, "description", "", "what the skill does and when to use it")
	return create
}

func joinSources(ss []skill.Source) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return strings.Join(out, ", ")
}

func countWarnings(c skill.Catalog) int {
	n := 0
	for _, s := range c.Skills {
		if len(s.Warnings) > 0 {
			n++
		}
	}
	return n
}

func noSkill(name string, c skill.Catalog) error {
	names := make([]string, 0, len(c.Skills))
	for _, s := range c.Skills {
		names = append(names, s.Name)
	}
	return fmt.Errorf("no skill %q (known: %s); see conch skills list", name, strings.Join(names, ", "))
}

func clipText(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
