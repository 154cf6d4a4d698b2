package config

import (
	"fmt"
	"os"
	"time"
)

// ScheduleConfig turns on scheduled wakes and watches (the schedule and
// watch tools); off by default.
type ScheduleConfig struct {
	Enabled bool `toml:"enabled" env:"ENABLED"`
	// MaxPerConversation caps one conversation's wakes and watches together.
	MaxPerConversation int `toml:"max_per_conversation" env:"MAX_PER_CONVERSATION"`
	// MinInterval is the shortest time between two firings of a cron wake.
	MinInterval Duration `toml:"min_interval" env:"MIN_INTERVAL"`
}

// HooksConfig configures the turn hooks run inside each sandbox.
type HooksConfig struct {
	Enabled bool `toml:"enabled" env:"ENABLED"`
	// Dir is a host directory with the operator's default hooks in
	// pre-turn/, pre-stop/ and post-turn/; they run before each
	// conversation's own. "" means none.
	Dir string `toml:"dir" env:"DIR"`
}

func (c ScheduleConfig) validate() []Problem {
	var ps []Problem
	if !c.Enabled {
		return nil
	}
	if c.MaxPerConversation < 1 {
		ps = append(ps, Problem{"schedule.max_per_conversation", "must be at least 1", "set a positive number, e.g. 20"})
	}
	if c.MinInterval.D() < time.Minute {
		ps = append(ps, Problem{"schedule.min_interval", fmt.Sprintf("%s is shorter than a minute (cron's resolution)", c.MinInterval.D()), "set 1m or more, e.g. 5m"})
	}
	return ps
}

func (c HooksConfig) validate() []Problem {
	if !c.Enabled || c.Dir == "" {
		return nil
	}
	fi, err := os.Stat(c.Dir)
	switch {
	case err != nil:
		return []Problem{{"hooks.dir", err.Error(), "create the directory (with pre-turn/, pre-stop/, post-turn/ inside) or set hooks.dir to \"\""}}
	case !fi.IsDir():
		return []Problem{{"hooks.dir", c.Dir + " is not a directory", "point hooks.dir at a directory with pre-turn/, pre-stop/, post-turn/ inside"}}
	}
	return nil
}
