package docker

import (
	"fmt"
	"slices"

	sandboximage "conch/images/sandbox"
)

// installs are what the derived image holds: the coding-agent CLIs of
// Options.Agents, then Options.Installs (MCP servers' pinned packages), in
// that order, each name once.
func (o Options) installs() ([]sandboximage.Agent, error) {
	as, err := lookupAgents(o.Agents)
	if err != nil {
		return nil, err
	}
	for _, in := range o.Installs {
		if err := in.Check(); err != nil {
			return nil, fmt.Errorf("sandbox installs: %w", err)
		}
		if slices.ContainsFunc(as, func(a sandboximage.Agent) bool { return a.Name == in.Name }) {
			return nil, fmt.Errorf("sandbox installs: %s is installed twice", in.Name)
		}
		as = append(as, in.Clone())
	}
	return as, nil
}
