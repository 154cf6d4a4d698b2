package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"conch/config"
)

// envFileName is the service's environment file, beside its config file:
// `conch service install` points the unit's EnvironmentFile at it and
// `conch init` writes secrets there.
const envFileName = "conch.env"

// envFilePath is the environment file that goes with the config in use.
func (a *app) envFilePath() string {
	p := a.configPath
	if p == "" {
		p = config.DefaultPath()
	}
	return filepath.Join(filepath.Dir(p), envFileName)
}

// environ is the environment every command reads its configuration from:
// the service's environment file, if there is one, under this process's own
// environment (a variable set in the shell wins). So an operator command in a
// shell without the model's key sees what the installed service sees.
func (a *app) environ() ([]string, error) {
	fileEnv, err := readEnvFile(a.envFilePath())
	if err != nil {
		return nil, err
	}
	return append(fileEnv, os.Environ()...), nil
}

// readEnvFile reads systemd's EnvironmentFile format: KEY=value lines, blank
// lines and # comments, values optionally in matching quotes. A missing file
// is no error.
func readEnvFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("environment file: %w", err)
	}
	defer f.Close()
	var env []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			// The line's text may be a secret: name only where it is.
			return nil, fmt.Errorf("environment file %s: line %d is not KEY=value", path, n)
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		env = append(env, k+"="+v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("environment file %s: %w", path, err)
	}
	return env, nil
}
