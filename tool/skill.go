package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"conch"
	"conch/skill"
)

// SkillTool is the tool `skill(name)`: it loads an enabled skill's
// instructions on demand (the system prompt lists only names and
// descriptions) and says where its files are in the sandbox.
type SkillTool struct{ m *skill.Manager }

var _ conch.Tool = (*SkillTool)(nil)

// NewSkill returns the skill tool over a manager.
func NewSkill(m *skill.Manager) *SkillTool { return &SkillTool{m: m} }

// Spec implements conch.Tool.
func (t *SkillTool) Spec() conch.ToolSpec {
	return conch.ToolSpec{
		Name: "skill",
		Description: "Load the instructions of a skill listed in <available_skills> before doing the task it describes. " +
			"The answer says where the skill's scripts and files are in your computer (read-only).",
		Parameters: schemaFor[skillArgs](),
	}
}

type skillArgs struct {
	Name string `json:"name" jsonschema:"the skill's name, as listed"`
}

// Run implements conch.Tool.
func (t *SkillTool) Run(ctx context.Context, env conch.ToolEnv, raw json.RawMessage) (conch.ToolOutput, error) {
	var args skillArgs
	if err := json.Unmarshal(raw, &args); err != nil {
		return conch.ToolFail(`skill needs {"name": string}: ` + err.Error()), nil
	}
	name := strings.TrimSpace(args.Name)
	if name == "" {
		return conch.ToolFail("skill needs the name of a skill from <available_skills>"), nil
	}
	s, c, err := t.m.Load(ctx, env, name)
	switch {
	case errors.Is(err, skill.ErrNoSkill):
		return conch.ToolFail(fmt.Sprintf("there is no skill %q; available: %s", name, available(c))), nil
	case errors.Is(err, skill.ErrDisabled):
		return conch.ToolFail(fmt.Sprintf("the skill %q is disabled (the operator can enable it with `conch skills enable %s`)", name, name)), nil
	case err != nil:
		if ctx.Err() != nil {
			return conch.ToolOutput{}, fmt.Errorf("skill: %w", ctx.Err())
		}
		return conch.ToolFail("skill " + name + " could not be loaded: " + err.Error()), nil
	}
	return conch.ToolOK(t.m.Body(s)), nil
}

func available(c skill.Catalog) string {
	var names []string
	for _, s := range c.Skills {
		if s.Enabled {
			names = append(names, s.Name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
