package main

import (
	"context"
	"fmt"
	"path/filepath"

	"conch"
	"conch/config"
	"conch/netpolicy"
	"conch/sandbox/docker"
	"conch/search"
	"conch/skill"
	"conch/tool"
)

// skillsSandboxDir is the host directory conch fills with the enabled
// skills; every sandbox mounts it read-only at skill.SandboxPath.
func skillsSandboxDir(cfg *config.Config) string { return filepath.Join(cfg.DataDir, "skills") }

// skillsMount is the runtime's extra mount for skills.
func skillsMount(cfg *config.Config) docker.BindMount {
	return docker.BindMount{Source: skillsSandboxDir(cfg), Target: skill.SandboxPath, ReadOnly: true}
}

// newSkills builds the skills manager over the store's cursors. withFiles
// says whether skill files reach sandboxes (a runtime is running, or a CLI
// command changes what running sandboxes see).
func newSkills(cfg *config.Config, state conch.CursorStore, withFiles bool, d *deps) *skill.Manager {
	o := skill.Options{
		Bundled:   skill.Bundled(),
		SharedDir: config.SkillDir(cfg.Skills.SharedDir),
		UserDir:   config.SkillDir(cfg.Skills.UserDir),
		Workspace: cfg.Skills.Workspace,
		State:     state,
	}
	if withFiles {
		o.SandboxDir = skillsSandboxDir(cfg)
	}
	if d != nil {
		o.Logger = d.log
	}
	return skill.NewManager(o)
}

// hostTools are the tools that run on the host and need no sandbox:
// web_fetch, web_search and skill.
func hostTools(d *deps) ([]conch.Tool, error) {
	tc := d.cfg.Tools
	allow, err := tc.WebAllowPrefixes()
	if err != nil {
		return nil, fmt.Errorf("tools.web_allow_private: %w", err)
	}
	proxy, err := tc.WebProxyURL()
	if err != nil {
		return nil, fmt.Errorf("tools.web_proxy: %w", err)
	}
	maxBytes, err := tc.WebFetchMaxBytesN()
	if err != nil {
		return nil, fmt.Errorf("tools.web_fetch_max_bytes: %w", err)
	}
	fetch := tool.NewWebFetch(tool.WebFetchOptions{
		Policy: netpolicy.Policy{Allow: allow}, Proxy: proxy,
		Timeout: tc.WebFetchTimeout.D(), MaxBytes: maxBytes, MaxChars: tc.WebFetchMaxChars,
		ContentTypes: tc.WebFetchContentTypes, Auditor: d.audit,
	})
	so := tool.WebSearchOptions{MaxResults: d.cfg.Search.MaxResults, Auditor: d.audit}
	if backend := d.cfg.Search.ActiveBackend(); backend != "none" {
		sc := d.cfg.Search
		key := sc.TavilyAPIKey
		if backend == "brave" {
			key = sc.BraveAPIKey
		}
		base := sc.BaseURL
		if backend == "searxng" {
			base = sc.SearXNGURL
		}
		b, err := search.New(search.Config{Backend: backend, APIKey: key, BaseURL: base, Depth: sc.TavilyDepth,
			Timeout: sc.Timeout.D(), Proxy: proxy})
		if err != nil {
			return nil, fmt.Errorf("search: %w", err)
		}
		so.Backend = b
	}
	if d.skills == nil {
		// Skill files reach Docker/Podman sandboxes by a bind mount, and
		// Kubernetes pods by a copy on use (docs/kubernetes.md).
		d.skills = newSkills(d.cfg, d.db, d.runtime != nil, d)
	}
	return []conch.Tool{fetch, tool.NewWebSearch(so), tool.NewSkill(d.skills)}, nil
}

// skillsPrompt is the agent's Skills hook.
func (d *deps) skillsPrompt(ctx context.Context, env conch.ToolEnv) string {
	if d.skills == nil {
		return ""
	}
	return d.skills.PromptBlock(ctx, env)
}
